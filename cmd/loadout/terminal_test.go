package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"loadout/chat/chattest"
	"loadout/proc"
	"loadout/tools/mcp/mcptest"
	"loadout/tools/pdf"
	"loadout/tools/shell"
	"loadout/worker"
)

// TestMain lets a test run this binary as loadout itself: with
// LOADOUT_TEST_MAIN set, the process is main, so a test can start it at
// a pseudo-terminal.
func TestMain(m *testing.M) {
	worker.Serve(map[string]worker.Func{pdf.Job: pdf.Work})
	proc.Serve()
	shell.RunChild()
	mcptest.MaybeServe()
	if os.Getenv("LOADOUT_TEST_MAIN") != "" {
		os.Args = append([]string{"loadout"}, strings.Fields(os.Getenv("LOADOUT_TEST_MAIN"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// screen collects what a process draws on its terminal.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
	got chan struct{}
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(p)
	s.mu.Unlock()
	select {
	case s.got <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen shows want count times in all.
func (s *screen) waitFor(t *testing.T, want string, count int) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for strings.Count(s.String(), want) < count {
		select {
		case <-s.got:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("the terminal never showed %q %d times; it shows:\n%q", want, count, s.String())
		}
	}
}

// TestConsoleAtATerminal runs `loadout chat` at a pseudo-terminal as a
// person would: a typed line, the Up arrow recalling it, a pasted block
// of two lines sent as one message, /quit; log lines go to console.log
// and the typed lines to console_history, not between the answers.
func TestConsoleAtATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	model := chattest.NewModelServer(t)
	model.Text("first answer")
	model.Text("second answer")
	model.Text("pasted answer")
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=chat", "TERM=xterm", "HOME="+dir,
		"LOADOUT_LLM_BASE_URL="+model.URL, "LOADOUT_LLM_API_KEY=sk-test",
		"LOADOUT_STORE_PATH="+filepath.Join(dir, "loadout.db"), "LOADOUT_LOG_LEVEL=debug")
	cmd.Dir = dir
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{got: make(chan struct{}, 1)}
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = io.Copy(scr, tty) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	typed := func(keys string) {
		t.Helper()
		if _, err := tty.WriteString(keys); err != nil {
			t.Fatal(err)
		}
	}
	lastUser := func(n int) string {
		t.Helper()
		reqs := model.Requests()
		if len(reqs) < n {
			t.Fatalf("the model got %d requests, want %d", len(reqs), n)
		}
		msgs := reqs[n-1].Messages
		return msgs[len(msgs)-1].Content
	}

	scr.waitFor(t, "Log lines go to "+filepath.Join(dir, "console.log"), 1)
	// The editor turns bracketed paste on each time it starts reading a
	// line: that is the sign the prompt is up.
	const reading = "\x1b[?2004h"
	scr.waitFor(t, reading, 1)
	typed("hello there\r")
	scr.waitFor(t, "first answer", 1)
	if got := lastUser(1); got != "hello there" {
		t.Errorf("the model got %q, want the typed line", got)
	}

	scr.waitFor(t, reading, 2)
	typed("\x1b[A") // Up: the line comes back to edit
	scr.waitFor(t, "you> hello there", 2)
	typed("\r")
	scr.waitFor(t, "second answer", 1)
	if got := lastUser(2); got != "hello there" {
		t.Errorf("Up then Enter sent %q, want the recalled line", got)
	}

	scr.waitFor(t, reading, 3)
	typed("\x1b[200~line one\nline two\x1b[201~")
	scr.waitFor(t, "line two", 1)
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("a paste was sent before Enter: %d requests", n)
	}
	typed("\r")
	scr.waitFor(t, "pasted answer", 1)
	if got := lastUser(3); got != "line one\nline two" {
		t.Errorf("the paste reached the model as %q, want one message of two lines", got)
	}

	scr.waitFor(t, reading, 4)
	typed("/quit\r")
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("/quit: %v\n%q", err, scr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("/quit did not end the console; the terminal shows:\n%q", scr.String())
	}
	<-copied

	if out := scr.String(); strings.Contains(out, "level=") || strings.Contains(out, "msg=") {
		t.Errorf("log lines reached the terminal:\n%q", out)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "console.log"))
	if err != nil || !strings.Contains(string(logged), "level=INFO") {
		t.Errorf("console.log: %v\n%s", err, logged)
	}
	history, err := os.ReadFile(filepath.Join(dir, "console_history"))
	if err != nil || !strings.Contains(string(history), "hello there") {
		t.Errorf("console_history: %v\n%s", err, history)
	}
}

// At a terminal, Ctrl-C during a message stops that message's turn
// ("Stopped.") and the prompt comes back, the console still running; the
// next message is answered; Ctrl-C at an empty prompt leaves.
func TestCtrlCStopsTheMessageNotTheConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	model := chattest.NewModelServer(t)
	model.Push(chattest.Step{Text: "too late", Delay: 30 * time.Second})
	model.Text("second answer")
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=chat", "TERM=xterm", "HOME="+dir,
		"LOADOUT_LLM_BASE_URL="+model.URL, "LOADOUT_LLM_API_KEY=sk-test",
		"LOADOUT_STORE_PATH="+filepath.Join(dir, "loadout.db"))
	cmd.Dir = dir
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{got: make(chan struct{}, 1)}
	go func() { _, _ = io.Copy(scr, tty) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	const reading = "\x1b[?2004h"
	scr.waitFor(t, reading, 1)
	tty.WriteString("take your time\r")
	deadline := time.Now().Add(10 * time.Second)
	for len(model.Requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	tty.WriteString("\x03") // Ctrl-C, while the model thinks
	scr.waitFor(t, "Stopped.", 1)
	scr.waitFor(t, reading, 2)
	tty.WriteString("and now?\r")
	scr.waitFor(t, "second answer", 1)
	if strings.Contains(scr.String(), "too late") {
		t.Fatal("the stopped answer was printed")
	}
	scr.waitFor(t, reading, 3)
	tty.WriteString("\x03") // at an empty prompt: leave
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("Ctrl-C at the prompt: %v\n%q", err, scr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("Ctrl-C at an empty prompt did not leave; the terminal shows:\n%q", scr.String())
	}
}
