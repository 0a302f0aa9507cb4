package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/store"
)

// BenchmarkReplicasTelegramWebhook runs one and then two `loadout serve`
// processes on one PostgreSQL database (LOADOUT_TEST_DSN) in Telegram
// webhook mode, posts -serve.chats chats × -serve.messages updates to
// them round-robin (a load balancer), and reports messages answered per
// second with each.
func BenchmarkReplicasTelegramWebhook(b *testing.B) {
	if os.Getenv(store.TestDSNVar) == "" {
		b.Skip("set " + store.TestDSNVar + " to a PostgreSQL server to run this")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "loadout")
	if out, err := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.ReportMetric(runReplicas(b, bin, filepath.Join(dir, fmt.Sprintf("%d-%d", n, i)), n), "msgs/s")
			}
		})
	}
}

func runReplicas(b *testing.B, bin, dir string, replicas int) float64 {
	b.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	dsn, err := store.TestDSN(dir)
	if err != nil {
		b.Fatal(err)
	}
	tg := telegramtest.New(b)
	model := chattest.NewModelServer(b)
	model.Fallback = "An answer with **some** formatting."
	chats, per := *benchChats, *benchMessages
	users := make([]string, chats)
	for i := range users {
		users[i] = strconv.Itoa(1000 + i)
	}
	var addrs []string
	var cmds []*exec.Cmd
	for r := 0; r < replicas; r++ {
		addr := freeAddr(b)
		addrs = append(addrs, addr)
		cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-bench\nstore:\n  driver: postgres\n  dsn: %q\n  path: %s\n"+
			"http:\n  listen: %s\nlog:\n  level: warn\n"+
			"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n  mode: webhook\n"+
			"  webhook_url: https://bot.example.com/telegram/hook\n  webhook_secret: s3cret\n"+
			"  send_per_second: -1\n  send_per_chat_second: -1\n  send_per_group_minute: -1\n",
			model.URL, dsn, filepath.Join(dir, strconv.Itoa(r), "loadout.db"), addr, telegramtest.Token, tg.Endpoint(), strings.Join(users, ", "))
		path := filepath.Join(dir, fmt.Sprintf("config-%d.yaml", r))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", "-config", path)
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
		b.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		})
	}
	for _, addr := range addrs {
		deadline := time.Now().Add(30 * time.Second)
		for {
			res, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s never became ready", addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var updates [][]byte
	for m := 0; m < per; m++ {
		for c := 0; c < chats; c++ {
			_, u := tg.Update(telegramtest.Message{From: telegramtest.User{ID: int64(1000 + c)}, Text: fmt.Sprintf("message %d", m)})
			updates = append(updates, u)
		}
	}
	total := len(updates)
	began := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Go(func() {
			for i := range next {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addrs[i%len(addrs)]+"/telegram/hook", bytes.NewReader(updates[i]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					continue
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Errorf("webhook answered %d", res.StatusCode)
				}
			}
		})
	}
	for i := range updates {
		next <- i
	}
	close(next)
	wg.Wait()
	tg.WaitFor(b, "every answer", func() bool { return len(tg.Sent()) >= total })
	took := time.Since(began)
	// A stopped process has finished what it had queued: a second
	// answer shows now.
	for _, c := range cmds {
		c.Process.Signal(os.Interrupt)
		c.Wait()
	}
	if n := len(tg.Sent()); n != total {
		b.Errorf("%d answers to %d messages", n, total)
	}
	return float64(total) / took.Seconds()
}
