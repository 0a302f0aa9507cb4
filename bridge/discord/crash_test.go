package discord

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/discord/discordtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// Environment of a process the kill test runs: the fake Discord's API
// and the database and journal it keeps.
const (
	envAPI     = "LOADOUT_TEST_DISCORD_API"
	envDB      = "LOADOUT_TEST_DISCORD_DB"
	envJournal = "LOADOUT_TEST_DISCORD_JOURNAL"
)

// TestDiscordProcess is the process the kill test starts, again and
// again: the channel on the parent's fake Discord, with a model that
// answers "re: " and the message after a short random while. It runs
// until it is killed.
func TestDiscordProcess(t *testing.T) {
	api := os.Getenv(envAPI)
	if api == "" {
		t.Skip("run by TestKilledAtRandomLosesAndDoublesNothing")
	}
	model := chattest.NewEchoServer(t)
	env := storetest.NewEnv(t, storetest.Options{DBPath: os.Getenv(envDB), Model: model})
	journal, err := bridge.OpenJournal(os.Getenv(envJournal))
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Token: discordtest.Token, APIURL: api, AllowedUsers: []string{"42", "43", "44"}, SendPerChannelSecond: -1,
		Delivery: bridge.Delivery{Journal: journal, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}},
		bridge.NewRouter(env.Engine, "loadout"), env.Store)
	a.Run(context.Background())
}

// The process is killed (SIGKILL: nothing runs at exit) at random times
// while three chats have messages in flight, some sent while it is down;
// after the last restart every message is answered exactly once, in its
// chat's order.
func TestKilledAtRandomLosesAndDoublesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	dc := discordtest.New(t)
	dir := t.TempDir()
	users := []discordtest.User{ana, bea, cleo}
	var logs strings.Builder
	start := func() *exec.Cmd {
		before, _, _, _ := dc.Gateway()
		cmd := exec.Command(os.Args[0], "-test.run=^TestDiscordProcess$")
		cmd.Env = append(os.Environ(), envAPI+"="+dc.APIURL, envDB+"="+filepath.Join(dir, "loadout.db"),
			envJournal+"="+filepath.Join(dir, "sent.journal"))
		out, _ := os.Create(filepath.Join(dir, fmt.Sprintf("process-%d.log", time.Now().UnixNano())))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); out.Close() })
		began := time.Now()
		deadline := began.Add(30 * time.Second)
		for {
			if n, _, _, _ := dc.Gateway(); n > before && dc.Connected() {
				t.Logf("connected after %s", time.Since(began).Round(time.Millisecond))
				return cmd
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(out.Name())
				t.Fatalf("the process never connected; it logged:\n%s", tail(string(b), 4000))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	kill := func(cmd *exec.Cmd) {
		cmd.Process.Kill()
		cmd.Wait()
	}
	var sent [3][]string
	post := func(i int) {
		text := fmt.Sprintf("chat %d message %d", i, len(sent[i]))
		sent[i] = append(sent[i], text)
		dc.Post(discordtest.Message{Author: users[i], Channel: dc.DM(users[i].ID), Content: text})
	}
	const rounds = 12
	for round := range rounds {
		cmd := start()
		for range 3 + rand.IntN(4) {
			post(rand.IntN(3))
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		kill(cmd)
		if round%2 == 0 {
			post(rand.IntN(3)) // sent while the process is down
		}
	}
	cmd := start()
	for i := range 3 {
		post(i)
	}
	answered := func(i int) []string {
		var out []string
		for _, s := range dc.Sent(dc.DM(users[i].ID)) {
			out = append(out, s.Content)
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		done := true
		for i := range 3 {
			done = done && len(answered(i)) >= len(sent[i])
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // anything sent twice shows by now
	kill(cmd)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			logs.Write(b)
		}
	}
	readBack := strings.Count(logs.String(), "read back messages sent while disconnected")
	resumed := strings.Count(logs.String(), "resuming messages left unfinished")
	t.Logf("%d processes killed; %d read back what was sent while down, %d resumed what was left unfinished", rounds, readBack, resumed)
	if readBack == 0 {
		t.Fatal("no process read back what was sent while it was down")
	}
	for i := range 3 {
		var want []string
		for _, text := range sent[i] {
			want = append(want, "re: "+text)
		}
		if got := answered(i); !slices.Equal(got, want) {
			t.Fatalf("chat %d: answers\n%q\nwant each message answered once, in order:\n%q\nthe processes logged:\n%s", i, got, want, tail(logs.String(), 4000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
