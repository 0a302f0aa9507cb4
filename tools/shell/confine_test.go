//go:build linux

package shell

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"loadout/tools"
)

// confinable skips a test where the kernel cannot confine commands.
func confinable(t *testing.T) {
	t.Helper()
	if v := landlockABI(); v < minABI {
		t.Skipf("this kernel's Landlock ABI is %d; %d is needed", v, minABI)
	}
}

// Found by probing, with exec.allow: [cat, ln]: cat /proc/<loadout
// pid>/environ returned the API key and the bot token; cat
// ../<another chat>/diary.txt read another chat's workspace; ln of it
// then files read returned it. Each command now runs confined: none of
// these reach anything, the system's own files still read, and the
// store is out of reach.
//
// Each probe runs twice: as the user commands run as (nobody, when
// loadout is root), and as loadout's own user. Run as root, the drop to
// nobody alone refused all but the hidden /etc/hostname with no
// Landlock rule at all; as root, only Landlock holds.
func TestCommandsAreConfined(t *testing.T) {
	confinable(t)
	t.Setenv("LOADOUT_TEST_SECRET", "sk-live-env-secret")
	for _, keep := range []bool{false, true} {
		name := "as the commands' user"
		if keep {
			name = "as loadout's own user (" + strconv.Itoa(os.Geteuid()) + ")"
		}
		t.Run(name, func(t *testing.T) { probeConfinement(t, keep) })
	}
}

// probeConfinement runs TestCommandsAreConfined's probes, as loadout's
// own user when keepUser.
func probeConfinement(t *testing.T, keepUser bool) {
	root := t.TempDir()
	d := dirs(filepath.Join(root, "files"))
	other := d.Dir("telegram:2")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "diary.txt"), []byte("Bea's diary"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(root, "loadout.db")
	if err := os.WriteFile(store, []byte("the store"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Enabled: true, Allow: []string{"cat", "ln", "sh", "python3"}, Timeout: 10 * time.Second,
		Hide: []string{"/etc/hostname"}, Protect: []string{store}, keepUser: keepUser}
	run := func(args string) output {
		t.Helper()
		r, out := call(t, cfg, d, args)
		if r.Status != tools.StatusSuccess {
			t.Fatalf("%s: %+v", args, r)
		}
		return out
	}
	for _, c := range []struct{ what, args string }{
		{"the environment of loadout", fmt.Sprintf(`{"command":"cat","args":["/proc/%d/environ"]}`, os.Getpid())},
		{"the environment of loadout, through self", `{"command":"sh","args":["-c","cat /proc/$PPID/environ"]}`},
		{"another chat's workspace", `{"command":"cat","args":["../telegram_2/diary.txt"]}`},
		{"another chat's workspace, by its full path", fmt.Sprintf(`{"command":"cat","args":[%q]}`, filepath.Join(other, "diary.txt"))},
		{"the store", fmt.Sprintf(`{"command":"cat","args":[%q]}`, store)},
		{"a hidden system file", `{"command":"cat","args":["/etc/hostname"]}`},
		{"a shadow file", `{"command":"cat","args":["/etc/shadow"]}`},
	} {
		out := run(c.args)
		if out.ExitCode == 0 || strings.Contains(out.Output, "sk-live") || strings.Contains(out.Output, "diary") && !strings.Contains(out.Output, "diary.txt") || strings.Contains(out.Output, "the store") {
			t.Errorf("%s: %+v", c.what, out)
		}
	}
	// A hard link of another chat's file is refused by Landlock.
	out := run(fmt.Sprintf(`{"command":"ln","args":[%q,"hard.txt"]}`, filepath.Join(other, "diary.txt")))
	if out.ExitCode == 0 {
		t.Errorf("ln: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(d.Dir("console:local"), "hard.txt")); err == nil {
		t.Error("the hard link was made")
	}
	// What commands need still works: system files, the workspace.
	if out := run(`{"command":"cat","args":["/etc/hosts"]}`); out.ExitCode != 0 {
		t.Errorf("reading /etc/hosts: %+v", out)
	}
	if out := run(`{"command":"sh","args":["-c","echo note > a.txt && mkdir -p sub && mv a.txt sub/b.txt && cat sub/b.txt"]}`); out.ExitCode != 0 || out.Output != "note\n" {
		t.Errorf("working in the workspace: %+v", out)
	}
	if b, err := os.ReadFile(filepath.Join(other, "diary.txt")); err != nil || string(b) != "Bea's diary" {
		t.Errorf("the other chat's diary: %q %v", b, err)
	}
}

// A command reaches no TCP listener, here or anywhere, unless
// exec.network is true.
func TestCommandsHaveNoNetworkUnlessAllowed(t *testing.T) {
	confinable(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	d := dirs(t.TempDir())
	script := fmt.Sprintf(`{"command":"python3","args":["-c","import socket\nsocket.create_connection(('127.0.0.1', %d), timeout=3)\nprint('connected')"]}`, port)
	cfg := Config{Enabled: true, Allow: []string{"python3"}, Timeout: 10 * time.Second}
	if _, out := call(t, cfg, d, script); out.ExitCode == 0 || strings.Contains(out.Output, "connected") {
		t.Errorf("without exec.network: %+v", out)
	}
	select {
	case <-accepted:
		t.Fatal("the listener accepted a connection")
	default:
	}
	cfg.Network = true
	if _, out := call(t, cfg, d, script); out.ExitCode != 0 || !strings.Contains(out.Output, "connected") {
		t.Errorf("with exec.network: %+v", out)
	}
}

// A fork bomb stops at exec.limits.processes and a 2 GB write at
// exec.limits.file_size_mb; loadout and the next command are unharmed.
func TestCommandsAreLimited(t *testing.T) {
	confinable(t)
	d := dirs(t.TempDir())
	cfg := Config{Enabled: true, Allow: []string{"python3", "sh", "echo"}, Timeout: 20 * time.Second,
		Limits: Limits{Processes: 40, FileSizeMB: 8}}
	bomb := `{"command":"python3","args":["-c","import os, time\nn = 0\ntry:\n    while n < 5000:\n        if os.fork() == 0:\n            os.close(1); os.close(2); time.sleep(1); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('stopped at', n, e.errno)"]}`
	_, out := call(t, cfg, d, bomb)
	var n, errno int
	if _, err := fmt.Sscanf(out.Output, "stopped at %d %d", &n, &errno); err != nil || n > 40 || errno != 11 {
		t.Errorf("the fork bomb: %+v", out)
	}
	// What it left running ended with it.
	gone(t)
	// The write forks nothing: the process limit counts every process of
	// the user, and a busy machine (tests run side by side) may have 40.
	// Python ignores SIGXFSZ, so the limit shows as EFBIG.
	_, out = call(t, cfg, d, `{"command":"python3","args":["-c","b = bytes(1 << 20)\nf = open('big', 'wb', buffering=0)\ntry:\n    for _ in range(2000):\n        f.write(b)\nexcept OSError as e:\n    print('stopped', e.errno)"]}`)
	st, err := os.Stat(filepath.Join(d.Dir("console:local"), "big"))
	if err != nil || st.Size() > 8<<20 {
		t.Errorf("the 2 GB write: %v %v %+v", st, err, out)
	}
	if out.Output != "stopped "+strconv.Itoa(int(syscall.EFBIG))+"\n" {
		t.Errorf("the write was not stopped by the limit: %+v", out)
	}
	if _, out := call(t, cfg, d, `{"command":"echo","args":["still here"]}`); out.Output != "still here\n" {
		t.Errorf("after the limits: %+v", out)
	}
}

// Where Landlock cannot confine, exec says so at start, naming the way
// out; exec.unconfined is that way, and exec off needs none.
func TestCheckNamesTheWayOut(t *testing.T) {
	defer func(f func() int) { kernelABI = f }(kernelABI)
	for _, abi := range []int{0, 3} {
		kernelABI = func() int { return abi }
		if err := Check(Config{Enabled: true}); err == nil || !strings.Contains(err.Error(), "exec.unconfined: true") || !strings.Contains(err.Error(), "ABI "+strconv.Itoa(abi)) {
			t.Errorf("ABI %d: Check = %v", abi, err)
		}
		if err := Check(Config{Enabled: true, Unconfined: true}); err != nil {
			t.Errorf("ABI %d, unconfined: %v", abi, err)
		}
		if err := Check(Config{}); err != nil {
			t.Errorf("ABI %d, exec off: %v", abi, err)
		}
	}
	kernelABI = func() int { return minABI }
	if err := Check(Config{Enabled: true}); err != nil {
		t.Errorf("ABI %d: %v", minABI, err)
	}
}

// BenchmarkExec is one `echo` through the exec tool, confined (the
// re-executed child: Landlock, limits, then the command) and not.
func BenchmarkExec(b *testing.B) {
	for _, unconfined := range []bool{false, true} {
		name := "confined"
		if unconfined {
			name = "unconfined"
		}
		b.Run(name, func(b *testing.B) {
			if !unconfined && landlockABI() < minABI {
				b.Skip("no Landlock here")
			}
			cfg := Config{Enabled: true, Allow: []string{"echo"}, Unconfined: unconfined}
			d := dirs(b.TempDir())
			r := tools.NewRegistry()
			if err := r.Add(Tool(cfg, d)); err != nil {
				b.Fatal(err)
			}
			x := tools.NewExecutor(r, nil)
			ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local"})
			b.ResetTimer()
			for b.Loop() {
				res := x.Run(ctx, nil, []tools.Call{{ID: "1", Name: "exec", Arguments: `{"command":"echo","args":["hi"]}`}})[0]
				if res.Status != tools.StatusSuccess {
					b.Fatal(res.Content)
				}
			}
		})
	}
}

// gone waits until none of the processes the command started is left,
// reaped ones included (a zombie still counts toward the process limit):
// those running as its user (nobody when the tests run as root), or
// those whose command line forks.
func gone(t *testing.T) {
	t.Helper()
	const marker = "os.fork()"
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
			// Another package's tests may run their own processes as
			// nobody at the same time (tools/browser's chromium): those
			// are not this command's.
			theirs := strings.Contains(string(b), "chrom")
			if strings.Contains(string(b), marker) || os.Geteuid() == 0 && !theirs && strings.Contains(string(st), "\nUid:\t65534\t") {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the command are left", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
