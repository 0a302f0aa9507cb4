package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"

	"golang.org/x/sys/unix"
)

// Flags of BenchmarkServeTelegram.
var (
	benchChats    = flag.Int("serve.chats", 200, "BenchmarkServeTelegram: chats sending at once")
	benchMessages = flag.Int("serve.messages", 3, "BenchmarkServeTelegram: messages per chat")
	benchProfile  = flag.String("serve.profile", "", "BenchmarkServeTelegram: directory for the process's profiles: heap at idle, CPU, heap and allocations of the load")
)

// BenchmarkServeTelegram measures the whole process: it builds loadout,
// starts `loadout serve` on the Telegram test fake with an instant model
// and the send limits lifted (the fake has none), and reports the time
// from start to the first getUpdates, the resident memory at idle and at
// its peak, messages answered per second when -serve.chats chats send
// -serve.messages each at once, and the process's CPU time per message.
//
//	go test -run '^$' -bench ServeTelegram -benchtime 1x ./cmd/loadout/
func BenchmarkServeTelegram(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "loadout")
	if out, err := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	// The binary just written sits in the page cache as the write left
	// it; an installed binary is read from disk. Evict it, so the
	// process's resident file pages are those a deployed one maps.
	evict(b, bin)
	if *benchProfile != "" {
		if err := os.MkdirAll(*benchProfile, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		r := runServe(b, bin, filepath.Join(dir, strconv.Itoa(i)))
		b.ReportMetric(r.start.Seconds()*1000, "start-ms")
		b.ReportMetric(r.restart.Seconds()*1000, "restart-ms")
		b.ReportMetric(r.idleRSS/1e6, "idle-RSS-MB")
		b.ReportMetric(r.idleAnon/1e6, "idle-anon-MB")
		b.ReportMetric(r.perSecond, "msgs/s")
		b.ReportMetric(r.cpuPerMsg.Seconds()*1000, "CPU-ms/msg")
		b.ReportMetric(r.peakRSS/1e6, "peak-RSS-MB")
	}
}

type serveFigures struct {
	start, restart   time.Duration
	idleRSS, peakRSS float64
	idleAnon         float64 // the process's own pages, without mapped files
	perSecond        float64
	cpuPerMsg        time.Duration
}

func runServe(b *testing.B, bin, dir string) serveFigures {
	b.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
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
	listen, pprof := "127.0.0.1:0", "false"
	if *benchProfile != "" {
		listen, pprof = freeAddr(b), "true"
	}
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-bench\nstore:\n  path: %s\nhttp:\n  listen: %s\n  pprof: %s\n"+
		"log:\n  level: warn\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n"+
		"  send_per_second: -1\n  send_per_chat_second: -1\n  send_per_group_minute: -1\n",
		model.URL, filepath.Join(dir, "loadout.db"), listen, pprof, telegramtest.Token, tg.Endpoint(), strings.Join(users, ", "))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	// start runs loadout and waits for its first getUpdates.
	start := func() (*exec.Cmd, time.Duration) {
		polls := len(tg.Calls("getUpdates"))
		cmd := exec.Command(bin, "serve", "-config", path)
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		began := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		})
		tg.WaitFor(b, "the first getUpdates", func() bool { return len(tg.Calls("getUpdates")) > polls })
		return cmd, time.Since(began)
	}
	var f serveFigures
	cmd, took := start()
	f.start = took
	// Idle: let start-up garbage be collected as it would be.
	time.Sleep(2 * time.Second)
	f.idleRSS = procStatus(b, cmd.Process.Pid, "VmRSS")
	f.idleAnon = procStatus(b, cmd.Process.Pid, "RssAnon")

	profiled := make(chan struct{})
	if *benchProfile != "" {
		saveProfile(b, listen, "heap", "idle-heap.pprof")
		go func() {
			defer close(profiled)
			saveProfile(b, listen, "profile?seconds=5", "cpu.pprof")
		}()
	} else {
		close(profiled)
	}
	cpu0 := procCPU(b, cmd.Process.Pid)
	loaded := time.Now()
	for m := 0; m < per; m++ {
		for c := 0; c < chats; c++ {
			tg.Push(telegramtest.Message{From: telegramtest.User{ID: int64(1000 + c)}, Text: fmt.Sprintf("message %d", m)})
		}
	}
	total := chats * per
	tg.WaitFor(b, "every answer", func() bool { return len(tg.Sent()) >= total })
	took = time.Since(loaded)
	cpu := procCPU(b, cmd.Process.Pid) - cpu0
	f.perSecond = float64(total) / took.Seconds()
	f.cpuPerMsg = cpu / time.Duration(total)
	f.peakRSS = procStatus(b, cmd.Process.Pid, "VmHWM")
	if *benchProfile != "" {
		saveProfile(b, listen, "heap", "load-heap.pprof")
		saveProfile(b, listen, "allocs", "allocs.pprof")
		<-profiled
	}
	// A restart: the binary is in the page cache and the database exists.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("loadout did not stop cleanly: %v", err)
	}
	_, f.restart = start()
	return f
}

// procStatus reads a kB figure of /proc/pid/status, in bytes.
func procStatus(b *testing.B, pid int, key string) float64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatalf("%s: %q", key, v)
			}
			return kb * 1024
		}
	}
	b.Fatalf("/proc/%d/status has no %s", pid, key)
	return 0
}

// procCPU is the user and system time the process has used.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("no /proc here: %v", err)
	}
	// The command name may hold spaces; the fields after it are fixed.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// freeAddr is a local address nothing listens on.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// saveProfile fetches /debug/pprof/<what> into -serve.profile/<name>.
func saveProfile(b *testing.B, addr, what, name string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + what)
	if err != nil {
		b.Errorf("profile %s: %v", what, err)
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Errorf("profile %s: %v %s", what, err, raw)
		return
	}
	if err := os.WriteFile(filepath.Join(*benchProfile, name), raw, 0o600); err != nil {
		b.Error(err)
	}
}

// evict drops path's pages from the page cache.
func evict(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Logf("cannot evict the binary from the page cache: %v", err)
	}
}
