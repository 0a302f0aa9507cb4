package shell

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/proc"
	"loadout/proc/proctest"
	"loadout/tools"
)

type dirs string

func (d dirs) Dir(chatKey string) string {
	return filepath.Join(string(d), strings.ReplaceAll(chatKey, ":", "_"))
}

func call(t *testing.T, cfg Config, d dirs, args string) (tools.Result, output) {
	t.Helper()
	r := tools.NewRegistry()
	if err := r.Add(Tool(cfg, d)); err != nil {
		t.Fatal(err)
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local"})
	res := tools.NewExecutor(r, nil).Run(ctx, nil, []tools.Call{{ID: "1", Name: "exec", Arguments: args}})[0]
	var out output
	if res.Status == tools.StatusSuccess {
		json.Unmarshal([]byte(res.Content), &out)
	}
	return res, out
}

func TestExec(t *testing.T) {
	d := dirs(t.TempDir())
	t.Setenv("LOADOUT_SECRET", "sk-live")
	cfg := Config{Enabled: true, Allow: []string{"echo", "pwd", "env", "sleep", "sh", "head"}}
	if _, out := call(t, cfg, d, `{"command":"echo","args":["hello; rm -rf /","$HOME"]}`); out.Output != "hello; rm -rf / $HOME\n" || out.ExitCode != 0 {
		t.Errorf("arguments reached a shell: %+v", out)
	}
	if _, out := call(t, cfg, d, `{"command":"pwd"}`); strings.TrimSpace(out.Output) != d.Dir("console:local") {
		t.Errorf("ran in %q, want the chat's workspace", out.Output)
	}
	if _, out := call(t, cfg, d, `{"command":"env"}`); strings.Contains(out.Output, "sk-live") || !strings.Contains(out.Output, "HOME="+d.Dir("console:local")) {
		t.Errorf("the environment is not clean: %q", out.Output)
	}
	if _, out := call(t, cfg, d, `{"command":"sh","args":["-c","echo oops >&2; exit 3"]}`); out.ExitCode != 3 || out.Output != "oops\n" {
		t.Errorf("exit code and stderr: %+v", out)
	}
	if _, out := call(t, cfg, d, `{"command":"head","args":["-c","5"],"stdin":"abcdefgh"}`); out.Output != "abcde" {
		t.Errorf("stdin: %+v", out)
	}
	capped := cfg
	capped.MaxOutput = 10
	if _, out := call(t, capped, d, `{"command":"sh","args":["-c","yes | head -c 100000"]}`); len(out.Output) != 10 || !strings.Contains(out.Note, "cut at 10 bytes") {
		t.Errorf("output cap: %+v", out)
	}
	short := cfg
	short.Timeout = 200 * time.Millisecond
	start := time.Now()
	marker := filepath.Join(t.TempDir(), "child")
	_, out := call(t, short, d, `{"command":"sh","args":["-c","(sleep 2; touch `+marker+`) & sleep 5"]}`)
	if out.ExitCode != -1 || !strings.Contains(out.Note, "exec.timeout") || time.Since(start) > 4*time.Second {
		t.Errorf("timeout: %+v after %s", out, time.Since(start))
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("a child of the timed-out command lived on")
	}
	if r, _ := call(t, cfg, d, `{"command":"rm","args":["-rf","/"]}`); r.Code != tools.CodePermission || !strings.Contains(r.Content, "exec.allow") {
		t.Errorf("a command not allowed: %+v", r)
	}
	if r, _ := call(t, cfg, d, `{"command":"../../bin/sh"}`); r.Code != tools.CodePermission {
		t.Errorf("a path: %+v", r)
	}
	if r, _ := call(t, Config{Allow: []string{"echo"}}, d, `{"command":"echo"}`); r.Code != "not_enabled" || !strings.Contains(r.Content, "exec.enabled") {
		t.Errorf("exec off: %+v", r)
	}
}

// TestMain lets exec run this test binary as its confined child.
func TestMain(m *testing.M) {
	proc.Serve()
	RunChild()
	os.Exit(m.Run())
}

// Calls of one answer run at once, and chats run in parallel: however
// many commands are asked for together, no more than exec.max_running
// run at once; the rest wait.
func TestCommandsAliveAtOnceStayWithinTheLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("commands are counted in /proc")
	}
	const limit, calls = 2, 6
	d := dirs(t.TempDir())
	cfg := Config{Enabled: true, Allow: []string{"sleep"}, Unconfined: true, MaxRunning: limit}
	r := tools.NewRegistry()
	if err := r.Add(Tool(cfg, d)); err != nil {
		t.Fatal(err)
	}
	x := tools.NewExecutor(r, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local"})
	most := proctest.Most(func() int { return len(proctest.Children("LOADOUT_KEEP")) })
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := x.Run(ctx, nil, []tools.Call{{ID: "1", Name: "exec", Arguments: `{"command":"sleep","args":["0.3"]}`}})[0]
			if res.Status != tools.StatusSuccess {
				t.Errorf("sleep: %+v", res)
			}
		}()
	}
	wg.Wait()
	if n := most(); n > limit || n == 0 {
		t.Errorf("%d commands were running at once; exec.max_running is %d", n, limit)
	}
}
