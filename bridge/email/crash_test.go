package email

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
	"loadout/bridge/email/emailtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// Environment of a process the kill test runs: the mail servers, and
// the database and journal it keeps.
const (
	envIMAP    = "LOADOUT_TEST_EMAIL_IMAP"
	envSMTP    = "LOADOUT_TEST_EMAIL_SMTP"
	envDB      = "LOADOUT_TEST_EMAIL_DB"
	envJournal = "LOADOUT_TEST_EMAIL_JOURNAL"
)

// TestEmailProcess is the process the kill test starts, again and
// again: the channel on the parent's mail servers, with a model that
// answers "re: " and the message after a short random while. It runs
// until it is killed.
func TestEmailProcess(t *testing.T) {
	imapAddr := os.Getenv(envIMAP)
	if imapAddr == "" {
		t.Skip("run by TestKilledAtRandomLosesAndDoublesNothing")
	}
	model := chattest.NewEchoServer(t)
	env := storetest.NewEnv(t, storetest.Options{DBPath: os.Getenv(envDB), Model: model})
	journal, err := bridge.OpenJournal(os.Getenv(envJournal))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Address: emailtest.Address, Password: emailtest.Password, IMAPURL: "imap://" + imapAddr, SMTPURL: "smtp://" + os.Getenv(envSMTP),
		AllowedSenders: []string{ana, bea, cleo}, TrustedAuthservID: emailtest.AuthservID, PollEvery: time.Second, MaxBackoff: 200 * time.Millisecond,
		// The limit is counted across restarts: this test's people write more than 30 in its minute.
		PerSenderHour: 1000,
		Delivery:      bridge.Delivery{Journal: journal, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}},
		bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err != nil {
		t.Fatal(err)
	}
	a.Run(context.Background())
}

// The process is killed (SIGKILL: nothing runs at exit) at random times
// while three people's threads have mail in flight, some delivered
// while it is down; after the last restart every message is answered
// exactly once, in its thread's order: each was stored in the inbox
// before it was marked \Seen, and an answer sent again after a kill
// carries the Message-ID it had.
func TestKilledAtRandomLosesAndDoublesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	srv := emailtest.New(t, emailtest.Options{})
	dir := t.TempDir()
	users := []string{ana, bea, cleo}
	start := func() *exec.Cmd {
		before := srv.Connections()
		cmd := exec.Command(os.Args[0], "-test.run=^TestEmailProcess$")
		cmd.Env = append(os.Environ(), envIMAP+"="+srv.IMAPAddr, envSMTP+"="+srv.SMTPAddr,
			envDB+"="+filepath.Join(dir, "loadout.db"), envJournal+"="+filepath.Join(dir, "sent.journal"))
		out, _ := os.Create(filepath.Join(dir, fmt.Sprintf("process-%d.log", time.Now().UnixNano())))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); out.Close() })
		deadline := time.Now().Add(30 * time.Second)
		for srv.Connections() <= before {
			if time.Now().After(deadline) {
				t.Fatal("the process never connected")
			}
			time.Sleep(5 * time.Millisecond)
		}
		return cmd
	}
	kill := func(cmd *exec.Cmd) {
		cmd.Process.Kill()
		cmd.Wait()
	}
	var sent [3][]string
	post := func(i int) {
		text := fmt.Sprintf("chat %d message %d", i, len(sent[i]))
		sent[i] = append(sent[i], text)
		srv.Deliver(t, from(users[i], emailtest.Mail{Subject: "Re: thread", References: []string{fmt.Sprintf("thread-%d@example.org", i)}, Text: text}))
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
			post(rand.IntN(3)) // delivered while the process is down
		}
	}
	cmd := start()
	for i := range 3 {
		post(i)
	}
	// What the person's mailbox shows: a part whose sending a kill cut
	// after the SMTP server took it, but before the process could record
	// that, is sent again after the restart with the same Message-ID,
	// which mail stores and clients show once. Any other repeat is a
	// message answered twice.
	resent := 0
	answered := func(i int) []string {
		var out []string
		byID := map[string]string{}
		for _, s := range sentTo(srv, users[i]) {
			if body, ok := byID[s.ID]; ok {
				if body != s.Body() {
					t.Fatalf("two messages with Message-ID %s: %q and %q", s.ID, body, s.Body())
				}
				resent++
				continue
			}
			byID[s.ID] = s.Body()
			out = append(out, s.Body())
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
	var logs strings.Builder
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			logs.Write(b)
		}
	}
	readBack := strings.Count(logs.String(), "read back messages that arrived while disconnected")
	resumed := strings.Count(logs.String(), "resuming messages left unfinished")
	resent = 0
	for i := range 3 {
		answered(i)
	}
	t.Logf("%d processes killed; %d read back what arrived while down, %d resumed what was left unfinished; %d parts sent again with their Message-ID", rounds, readBack, resumed, resent)
	if readBack == 0 {
		t.Fatal("no process read back what arrived while it was down")
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
	for _, m := range srv.Mailbox(t, "INBOX") {
		if !m.Seen {
			t.Fatalf("message %d was left unseen", m.UID)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
