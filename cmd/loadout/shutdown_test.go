package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/proc/proctest"
	"loadout/tools/mcp/mcptest"
)

// TestSIGTERMWithAMegabyteInFlight runs the built process on a 1 MB
// message whose 1 MB answer goes out a part a second (Telegram's limit in
// a private chat): SIGTERM ends it within http.shutdown_grace, and the
// next start sends the rest, so every part arrives and none twice.
func TestSIGTERMWithAMegabyteInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	var answer strings.Builder
	for i := 0; answer.Len() < 1<<20; i++ {
		fmt.Fprintf(&answer, "w%06d ", i)
	}
	// Answers are capped at bridge.DefaultMaxReply: the words that fit
	// are the ones that must arrive.
	var words []string
	for _, w := range strings.Fields(answer.String()[:bridge.DefaultMaxReply-len(bridge.TextCut)]) {
		if len(w) == 7 {
			words = append(words, w)
		}
	}
	// A tool that answers with a megabyte, which the model gets cut.
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 1<<20))
	}))
	defer big.Close()
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	os.MkdirAll(manifests, 0o700)
	manifest := fmt.Sprintf(`[{"name": "big_fetch", "description": "A megabyte", "parameters": {"type": "object", "properties": {}},
		"http": {"method": "GET", "url": %q}, "read_only": true}]`, big.URL+"/big")
	if err := os.WriteFile(filepath.Join(manifests, "big.json"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	model.Call("load_tool_group", `{"group_name":"big"}`)
	model.Call("big_fetch", `{}`)
	model.Text(answer.String())
	config := func(limits string) string {
		path := filepath.Join(dir, "config.yaml")
		raw := fmt.Sprintf("tools:\n  manifests_dir: %s\nllm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\nhttp:\n  listen: 127.0.0.1:0\n  shutdown_grace: 2s\n"+
			"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [\"42\"]\n%s",
			manifests, model.URL, filepath.Join(dir, "loadout.db"), telegramtest.Token, tg.Endpoint(), limits)
		if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	start := func(path string) *child {
		c := startChild(t, "serve -config "+path)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the log of %s:\n%.3000s", path, c.logs.String())
			}
		})
		return c
	}
	// progress is what the first process has done so far: the model's
	// requests and the parts sent.
	progress := func() int { return len(model.Requests()) + len(tg.Sent()) }

	first := start(config(""))
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: strings.Repeat("a megabyte of text ", 1<<20/19)})
	first.waitFor(t, "2 sent parts", progress, func() bool { return len(tg.Sent()) >= 2 })
	signalled := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.exited:
		if first.err != nil {
			t.Fatalf("exit after SIGTERM: %v", first.err)
		}
	case <-time.After(20 * time.Second): // the grace is 2 s
		t.Fatal("SIGTERM did not end the process within its grace period")
	}
	// Paced: a part a second, judged by when the server got them, not by
	// when this process got to look. After SIGTERM: the part on its way,
	// a part a second for the 2 s grace, and one let finish at its end.
	before := tg.Sent()
	late := 0
	for i, s := range before {
		if s.At.After(signalled) {
			late++
		}
		if i > 0 && s.At.Sub(before[0].At) < time.Duration(i)*time.Second-500*time.Millisecond {
			t.Fatalf("part %d went out %s after the first: the answer was not paced", i+1, s.At.Sub(before[0].At))
		}
	}
	if late > 4 {
		t.Fatalf("%d parts went out after SIGTERM, with a grace of 2 s", late)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the model was asked %d times, want 3 (load, fetch, answer)", len(reqs))
	}
	if got := reqs[2].Messages[len(reqs[2].Messages)-1]; got.Role != "tool" || len(got.Content) > 40000 || !strings.HasPrefix(got.Content, "xxxx") {
		t.Fatalf("the megabyte tool result reached the model as %s of %d bytes: %.100q", got.Role, len(got.Content), got.Content)
	}
	if got := reqs[0].Messages; !strings.HasPrefix(got[len(got)-1].Content, "a megabyte of text") || len(got[len(got)-1].Content) < 1<<20-19 {
		t.Fatalf("the model got %d bytes of the message", len(got[len(got)-1].Content))
	}

	// The next start, with the send limits lifted, sends the rest.
	second := start(config("  send_per_second: -1\n  send_per_chat_second: -1\n"))
	seen := map[string]int{}
	defer func() {
		if t.Failed() {
			t.Logf("sent %d parts, %d distinct words of %d", len(tg.Sent()), len(seen), len(words))
		}
	}()
	second.waitFor(t, "every word", func() int { return len(tg.Sent()) }, func() bool {
		clear(seen)
		for _, s := range tg.Sent() {
			for _, w := range strings.Fields(s.Text) {
				if len(w) == 7 && w[0] == 'w' {
					seen[w]++
				}
			}
		}
		return len(seen) >= len(words)
	})
	for _, w := range words {
		if seen[w] == 0 {
			t.Fatalf("%s never arrived", w)
		}
	}
	if last := tg.Sent()[len(tg.Sent())-1].Text; !strings.Contains(last, strings.TrimSpace(bridge.TextCut)) {
		t.Errorf("the last part does not say the answer was cut: %.200q", last)
	}
	twice := 0
	for _, n := range seen {
		if n > 1 {
			twice++
		}
	}
	sent := tg.Sent()
	if twice > 0 {
		t.Errorf("%d words arrived more than once over %d parts (%d before the restart)", twice, len(sent), len(before))
	}
	if n := len(model.Requests()); n != 3 {
		t.Errorf("the restart asked the model again: %d requests", n)
	}
	second.cmd.Process.Signal(syscall.SIGTERM)
	<-second.exited
	if second.err != nil {
		t.Errorf("second process: %v", second.err)
	}
}

// child is loadout run by a test as a process of its own (TestMain's
// LOADOUT_TEST_MAIN), its log kept.
type child struct {
	cmd  *exec.Cmd
	logs lockedBuffer
	// exited is closed when the process has ended; err is then its
	// exit.
	exited chan struct{}
	err    error
}

// startChild starts loadout with args; the test's cleanup kills it.
func startChild(t *testing.T, args string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0]), exited: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN="+args)
	c.cmd.Stderr = &c.logs
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { c.cmd.Process.Kill(); <-c.exited })
	return c
}

// childStall is how long a child may go without progress before a test
// gives up on it: long, since it only tells a hang from slow work.
const childStall = time.Minute

// waitFor waits until cond holds. It fails at once if the process ends
// first, and if progress (a count of what the process has done that the
// test can see) stops moving for childStall. It sets no bound on the
// whole wait: what a race-built process does with a megabyte takes a
// few seconds of processor time, and a loaded machine stretches those
// seconds by any factor.
func (c *child) waitFor(t *testing.T, what string, progress func() int, cond func() bool) {
	t.Helper()
	last, moved := progress(), time.Now()
	for !cond() {
		select {
		case <-c.exited:
			if cond() {
				return
			}
			t.Fatalf("the process ended (%v) before %s", c.err, what)
		case <-time.After(10 * time.Millisecond):
		}
		if p := progress(); p != last {
			last, moved = p, time.Now()
		} else if time.Since(moved) > childStall {
			t.Fatalf("no progress towards %s for %s", what, childStall)
		}
	}
}

// lockedBuffer is a bytes.Buffer a process writes while a test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Found by probing: `loadout chat` ignored the shutdown grace: SIGTERM
// while a 20-second model call was in flight kept it alive for the
// pipeline's default 30 s. It honours delivery.shutdown_grace (and its
// older name) like serve.
func TestChatStopsWithinItsGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, key := range []string{"delivery", "http"} {
		model := chattest.NewModelServer(t)
		model.Push(chattest.Step{Text: "late", Delay: 25 * time.Second})
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\n%s:\n  shutdown_grace: 1s\n", model.URL, filepath.Join(dir, "loadout.db"), key)
		if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=chat -config "+path)
		in, _ := cmd.StdinPipe()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		io.WriteString(in, "hello\n") // stdin stays open
		deadline := time.Now().Add(10 * time.Second)
		for len(model.Requests()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if len(model.Requests()) == 0 {
			cmd.Process.Kill()
			t.Fatalf("the model was never asked\n%s", out.String())
		}
		cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(15 * time.Second): // the grace is 1 s; the old default 30 s
			cmd.Process.Kill()
			t.Fatalf("%s.shutdown_grace: SIGTERM did not end `loadout chat` in time\n%s", key, out.String())
		}
		in.Close()
	}
}

// What loadout starts ends with it, whichever way it ends: an MCP stdio
// server and what the server started, a command running for the model
// and its children, on SIGTERM and on SIGKILL.
func TestNothingLoadoutStartedOutlivesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		server, command := fmt.Sprintf("2%d01.5", i), fmt.Sprintf("2%d02.5", i)
		model := chattest.NewModelServer(t)
		model.Call("load_tool_group", `{"group_name":"exec"}`)
		model.Call("exec", fmt.Sprintf(`{"command":"sh","args":["-c","sleep %s & sleep %s"]}`, command, command))
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\ndelivery:\n  shutdown_grace: 1s\n"+
			"exec:\n  enabled: true\n  allow: [sh]\n  timeout: 60s\n"+
			"mcp:\n  servers:\n    - name: calc\n      command: sh\n      args: [\"-c\", \"sleep %s & exec %s -test.run=^$\"]\n      env:\n        %s: \"1\"\n",
			model.URL, filepath.Join(dir, "loadout.db"), server, exe, mcptest.EnvVar)
		if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=chat -config "+path)
		in, _ := cmd.StdinPipe()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		io.WriteString(in, "run it\n")
		deadline := time.Now().Add(15 * time.Second)
		for (proctest.Running(server) == 0 || proctest.Running(command) < 2) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if proctest.Running(server) == 0 || proctest.Running(command) < 2 {
			cmd.Process.Kill()
			t.Fatalf("%s: the server (%d) or the command (%d) never ran\n%s", sig, proctest.Running(server), proctest.Running(command), out.String())
		}
		cmd.Process.Signal(sig)
		cmd.Wait()
		in.Close()
		deadline = time.Now().Add(10 * time.Second)
		for proctest.Running(server)+proctest.Running(command) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n, m := proctest.Running(server), proctest.Running(command); n+m > 0 {
			t.Errorf("after %s: %d processes of the MCP server and %d of the command are left", sig, n, m)
		}
	}
}

// Found by probing: a serve stopped soon after it started logged errors
// ("scheduler: cannot read unfinished runs: context canceled"): work
// its own stop cancelled was reported as a failure. A stop at any moment
// of the start logs no error.
func TestAStopLogsNoError(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, after := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond, 300 * time.Millisecond} {
		tg := telegramtest.New(t)
		model := chattest.NewModelServer(t)
		path := stopConfig(t, tg, model)
		// A first start makes the database; the second is a restart.
		for start := 1; start <= 2; start++ {
			polls := len(tg.Calls("getUpdates"))
			c := startChild(t, "serve -config "+path)
			c.waitFor(t, "the first getUpdates", func() int { return len(c.logs.String()) },
				func() bool { return len(tg.Calls("getUpdates")) > polls })
			time.Sleep(after)
			c.cmd.Process.Signal(syscall.SIGTERM)
			<-c.exited
			if c.err != nil {
				t.Errorf("start %d, stopped %s after its first poll: %v", start, after, c.err)
			}
			for _, line := range errorLines(c.logs.String()) {
				t.Errorf("start %d, stopped %s after its first poll, it logged: %s", start, after, line)
			}
		}
	}
	// Stopped while Telegram has not yet answered getMe: the channel is
	// still connecting.
	tg := telegramtest.New(t)
	tg.Hold("getMe", 0)
	model := chattest.NewModelServer(t)
	path := stopConfig(t, tg, model)
	c := startChild(t, "serve -config "+path)
	c.waitFor(t, "getMe", func() int { return len(c.logs.String()) }, func() bool { return len(tg.Calls("getMe")) > 0 })
	c.cmd.Process.Signal(syscall.SIGTERM)
	<-c.exited
	if c.err != nil {
		t.Errorf("stopped while connecting: %v\n%s", c.err, c.logs.String())
	}
	for _, line := range errorLines(c.logs.String()) {
		t.Errorf("stopped while connecting, it logged: %s", line)
	}
}

// Found by probing: a serve stopped 30 ms after it was started, while its
// tools loaded, exited with status 1 ("loadout: custom tools: context
// canceled"). A stop at any moment of the start is a clean exit, or,
// before the process handles signals at all, SIGTERM's own.
func TestAStopDuringStartIsClean(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	path := stopConfig(t, tg, model)
	for _, ms := range []time.Duration{10, 20, 30, 45, 60, 80, 100, 130, 160, 200, 250, 300} {
		c := startChild(t, "serve -config "+path)
		time.Sleep(ms * time.Millisecond)
		c.cmd.Process.Signal(syscall.SIGTERM)
		<-c.exited
		if c.err != nil && c.err.Error() != "signal: terminated" {
			t.Errorf("stopped %d ms after it was started: %v\n%s", ms, c.err, c.logs.String())
		}
		for _, line := range errorLines(c.logs.String()) {
			t.Errorf("stopped %d ms after it was started, it logged: %s", ms, line)
		}
	}
}

// stopConfig writes the config of a serve with Telegram on tg and the
// model on model, in a directory of its own, and returns its path.
func stopConfig(t *testing.T, tg *telegramtest.Server, model *chattest.ModelServer) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\nhttp:\n  listen: 127.0.0.1:0\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [\"42\"]\n",
		model.URL, filepath.Join(dir, "loadout.db"), telegramtest.Token, tg.Endpoint())
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// errorLines are the lines of a log at level ERROR.
func errorLines(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}
