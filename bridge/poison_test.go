package bridge_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/store"
)

// TestMain lets a test run this binary as a process that crashes.
func TestMain(m *testing.M) {
	if db := os.Getenv("LOADOUT_TEST_POISON_DB"); db != "" {
		os.Exit(poisonProcess(db, os.Getenv("LOADOUT_TEST_POISON_SENT"), strings.Fields(os.Getenv("LOADOUT_TEST_POISON_SEND"))))
	}
	os.Exit(m.Run())
}

// fileOutlet appends what it sends to a file, so the test sees it
// across the processes it runs.
type fileOutlet struct{ path string }

func (o fileOutlet) Split(text string) []string { return []string{text} }
func (o fileOutlet) Send(_ context.Context, _ []byte, text string) error {
	f, err := os.OpenFile(o.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s\n", text)
	return err
}

// crasher answers every message, except "boom": that one ends the whole
// process from a goroutine, as a runtime fatal error or an out-of-memory
// kill would — nothing can recover it.
type crasher struct{}

func (crasher) Handle(_ context.Context, in chat.Inbound) (string, error) {
	if in.Text == "boom" {
		go func() { panic("the process ends here") }()
		select {}
	}
	return "ok: " + in.Text, nil
}

// poisonProcess is one life of the service: it resumes what the inbox
// holds, takes in send, and exits once nothing is left.
func poisonProcess(db, sent string, send []string) int {
	st, err := store.OpenTest(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: st, Handler: crasher{}, Outlet: fileOutlet{sent},
		Workers: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// Every message is stored before any turn runs (and ends the
	// process).
	for i, text := range send {
		if _, err := p.Accept(ctx, bridge.Pending{ID: fmt.Sprint("update:", i), Inbound: chat.Inbound{ChatKey: "test:1", UserKey: "test:1", Text: text}, Route: []byte("r")}); err != nil {
			return 1
		}
	}
	if err := p.Start(ctx); err != nil {
		return 1
	}
	for range 500 {
		items, err := st.Unfinished(ctx, "test")
		if err == nil && len(items) == 0 {
			p.Stop()
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 1
}

// Found by probing: a message whose handling ends the process (a
// hostile PDF) ran again at every restart and ended it again: under
// Restart=always, down for good. Each turn's start is recorded before it
// runs; a message whose turn started delivery.max_attempts (3) times and
// never came back is set aside, its person told once with its reference,
// and the chat's next message is answered.
func TestPoisonMessageIsQuarantinedAfterThreeCrashes(t *testing.T) {
	dir := t.TempDir()
	db, sent := filepath.Join(dir, "loadout.db"), filepath.Join(dir, "sent.txt")
	run := func(send string) int {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LOADOUT_TEST_POISON_DB="+db, "LOADOUT_TEST_POISON_SENT="+sent, "LOADOUT_TEST_POISON_SEND="+send)
		cmd.Run()
		return cmd.ProcessState.ExitCode()
	}
	// The message arrives; the process dies under it, and at each of the
	// next two restarts.
	for i, send := range []string{"boom hello", "", ""} {
		if code := run(send); code == 0 {
			t.Fatalf("life %d ended well: the crash did not happen", i+1)
		}
	}
	b, _ := os.ReadFile(sent)
	if len(b) != 0 {
		t.Fatalf("sent before the quarantine: %q", b)
	}
	// The fourth start sets it aside and answers the next message.
	if code := run(""); code != 0 {
		t.Fatalf("the fourth life exited %d", code)
	}
	b, _ = os.ReadFile(sent)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != fmt.Sprintf(bridge.TextQuarantined, "test:update:0") || lines[1] != "ok: hello" {
		t.Fatalf("sent %q", lines)
	}
	// A fifth life has nothing left to do, and says nothing again.
	if code := run(""); code != 0 {
		t.Fatalf("the fifth life exited %d", code)
	}
	if b2, _ := os.ReadFile(sent); string(b2) != string(b) {
		t.Fatalf("more was sent: %q", b2)
	}
}
