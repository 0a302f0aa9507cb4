package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/internal/release"
)

// A serve gives its memory back once a burst of messages is over, and
// not while it idles: loadout_memory_released_total counts the releases
// (package release).
func TestMemoryIsGivenBackAfterABurst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	model.Fallback = "An answer with **some** formatting."
	dir := t.TempDir()
	addr := freeAddr(t)
	path := filepath.Join(dir, "config.yaml")
	const chats = 150
	users := ""
	for c := range chats {
		users += fmt.Sprintf("%q, ", strconv.Itoa(1000+c))
	}
	raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\nhttp:\n  listen: %s\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n",
		model.URL, filepath.Join(dir, "loadout.db"), addr, telegramtest.Token, tg.Endpoint(), users)
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "serve -config "+path)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the log:\n%.3000s", c.logs.String())
		}
	})
	released := func() int {
		m := regexp.MustCompile(`(?m)^loadout_memory_released_total (\d+)`).FindStringSubmatch(scrape(t, "http://"+addr+"/metrics"))
		if m == nil {
			t.Fatal("/metrics lacks loadout_memory_released_total")
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	c.waitFor(t, "the first getUpdates", func() int { return len(c.logs.String()) },
		func() bool { return len(tg.Calls("getUpdates")) > 0 })
	// Idle: several looks, none due.
	time.Sleep(4 * release.Every)
	if n := released(); n != 0 {
		t.Fatalf("an idle process gave memory back %d times", n)
	}
	for c := range chats {
		tg.Push(telegramtest.Message{From: telegramtest.User{ID: int64(1000 + c)}, Text: "hello"})
	}
	c.waitFor(t, "every answer", func() int { return len(tg.Sent()) }, func() bool { return len(tg.Sent()) >= chats })
	// A scrape allocates: the test looks less often than the process,
	// so that the process has quiet seconds between them.
	var looked time.Time
	c.waitFor(t, "a release after the burst", func() int { return len(tg.Sent()) }, func() bool {
		if time.Since(looked) < 3*release.Every {
			return false
		}
		looked = time.Now()
		return released() > 0
	})
	c.cmd.Process.Signal(syscall.SIGTERM)
	<-c.exited
}
