package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	benchBin      = flag.String("serve.bin", "", "BenchmarkServeTelegram, BenchmarkServeStart: measure this loadout binary instead of building the package")
	benchVs       = flag.String("serve.vs", "", "BenchmarkServeTelegram, BenchmarkServeStart: a second loadout binary (an older build) measured in turn with the first, pair by pair")
	benchRuns     = flag.Int("serve.runs", 1, "BenchmarkServeTelegram, BenchmarkServeStart: runs of each binary per iteration (with -serve.vs: pairs, the first of each pair alternating)")
	benchLatency  = flag.Duration("serve.latency", 0, "BenchmarkServeStart: the Telegram fake answers every request this much after it arrives, as a distant Bot API does")
	benchCached   = flag.Bool("serve.cached", false, "BenchmarkServeTelegram, BenchmarkServeStart: start each binary from the page cache (as a restarted one is) instead of from disk")
)

// BenchmarkServeTelegram measures the whole process: it builds loadout,
// starts `loadout serve` on the Telegram test fake with an instant model
// and the send limits lifted (the fake has none), and reports the time
// from start to the first getUpdates, the resident memory at idle and at
// its peak, messages answered per second when -serve.chats chats send
// -serve.messages each at once, and the process's CPU time per message.
// Each figure is the median of the iteration's -serve.runs runs.
//
// -serve.bin measures a binary built elsewhere; -serve.vs measures a
// second one in the same run, in pairs (A B, B A, A B, …), and reports
// its figures with a "vs-" prefix and how many pairs each won:
//
//	go test -tags sqlite_fts5 -run '^$' -bench ServeTelegram -benchtime 1x ./cmd/loadout/
//	go test -tags sqlite_fts5 -run '^$' -bench ServeTelegram -benchtime 1x -count 4 ./cmd/loadout/ \
//		-serve.vs /tmp/loadout-old -serve.runs 3
func BenchmarkServeTelegram(b *testing.B) {
	dir := b.TempDir()
	bins := serveBinaries(b, dir)
	if *benchProfile != "" {
		if err := os.MkdirAll(*benchProfile, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	runs := max(*benchRuns, 1)
	for i := 0; i < b.N; i++ {
		got := make([][]serveFigures, len(bins))
		for r := 0; r < runs; r++ {
			for k := range bins {
				j := k
				if r%2 == 1 {
					j = len(bins) - 1 - k
				}
				// The binary just written sits in the page cache as the
				// write left it; an installed binary is read from disk.
				// Evict it before every start, so the process's resident
				// file pages are those a deployed one maps.
				if !*benchCached {
					evict(b, bins[j])
				}
				got[j] = append(got[j], runServe(b, bins[j], filepath.Join(dir, fmt.Sprintf("%d-%d-%d", i, r, j))))
			}
		}
		for j, prefix := range []string{"", "vs-"}[:len(bins)] {
			f := got[j]
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.start.Seconds() * 1000 }), prefix+"start-ms")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.startCPU.Seconds() * 1000 }), prefix+"start-CPU-ms")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.restart.Seconds() * 1000 }), prefix+"restart-ms")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.idleRSS / 1e6 }), prefix+"idle-RSS-MB")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.idleAnon / 1e6 }), prefix+"idle-anon-MB")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.perSecond }), prefix+"msgs/s")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.cpuPerMsg.Seconds() * 1000 }), prefix+"CPU-ms/msg")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.peakRSS / 1e6 }), prefix+"peak-RSS-MB")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.loadAnon / 1e6 }), prefix+"load-anon-MB")
			b.ReportMetric(median(f, func(f serveFigures) float64 { return f.quietAnon / 1e6 }), prefix+"quiet-anon-MB")
		}
		if len(bins) == 2 {
			b.Logf("pairs won by -serve.bin (lower is better): start %d of %d, CPU per message %d of %d, idle anonymous memory %d of %d",
				wins(got, func(f serveFigures) float64 { return float64(f.start) }), runs,
				wins(got, func(f serveFigures) float64 { return float64(f.cpuPerMsg) }), runs,
				wins(got, func(f serveFigures) float64 { return f.idleAnon }), runs)
		}
	}
}

// serveBinaries returns the binaries to measure, copied into dir (so
// each is read from the same file system as a file written by a copy, as
// an installed binary is): -serve.bin or the package built, then
// -serve.vs if set.
func serveBinaries(b *testing.B, dir string) []string {
	bin := filepath.Join(dir, "loadout")
	if *benchBin != "" {
		copyFile(b, *benchBin, bin)
	} else if out, err := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	bins := []string{bin}
	if *benchVs != "" {
		vs := filepath.Join(dir, "loadout-vs")
		copyFile(b, *benchVs, vs)
		bins = append(bins, vs)
	}
	return bins
}

// BenchmarkServeStart measures only the start of `loadout serve` on the
// Telegram test fake, as BenchmarkServeTelegram's first one: the binary
// dropped from the page cache, a new database. It reports the time from
// start to the first getUpdates and the processor time the process used
// until then (which the machine's other work hardly moves), the median
// of -serve.runs starts per iteration; with -serve.vs, in pairs:
//
//	go test -tags sqlite_fts5 -run '^$' -bench ServeStart -benchtime 1x ./cmd/loadout/ \
//		-serve.vs /tmp/loadout-old -serve.runs 20
func BenchmarkServeStart(b *testing.B) {
	dir := b.TempDir()
	bins := serveBinaries(b, dir)
	fakes := newServeFakes(b)
	fakes.tg.SetLatency(*benchLatency)
	runs := max(*benchRuns, 1)
	for i := 0; i < b.N; i++ {
		got := make([][]serveFigures, len(bins))
		for r := 0; r < runs; r++ {
			for k := range bins {
				j := k
				if r%2 == 1 {
					j = len(bins) - 1 - k
				}
				if !*benchCached {
					evict(b, bins[j])
				}
				path := fakes.config(b, filepath.Join(dir, fmt.Sprintf("%d-%d-%d", i, r, j)), "")
				cmd, took, cpu := fakes.start(b, bins[j], path)
				got[j] = append(got[j], serveFigures{start: took, startCPU: cpu})
				stop(b, cmd)
			}
		}
		for j, prefix := range []string{"", "vs-"}[:len(bins)] {
			b.ReportMetric(median(got[j], func(f serveFigures) float64 { return f.start.Seconds() * 1000 }), prefix+"start-ms")
			b.ReportMetric(median(got[j], func(f serveFigures) float64 { return f.startCPU.Seconds() * 1000 }), prefix+"start-CPU-ms")
		}
		if len(bins) == 2 {
			b.Logf("pairs won by -serve.bin (lower is better): start %d of %d, its processor time %d of %d",
				wins(got, func(f serveFigures) float64 { return float64(f.start) }), runs,
				wins(got, func(f serveFigures) float64 { return float64(f.startCPU) }), runs)
		}
	}
}

// median is the median of figure over runs.
func median(runs []serveFigures, figure func(serveFigures) float64) float64 {
	v := make([]float64, len(runs))
	for i, f := range runs {
		v[i] = figure(f)
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// wins counts the pairs in which the first binary's figure was lower.
func wins(got [][]serveFigures, figure func(serveFigures) float64) int {
	n := 0
	for r := range got[0] {
		if figure(got[0][r]) < figure(got[1][r]) {
			n++
		}
	}
	return n
}

// copyFile copies the executable from to to.
func copyFile(b *testing.B, from, to string) {
	raw, err := os.ReadFile(from)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(to, raw, 0o755); err != nil {
		b.Fatal(err)
	}
}

type serveFigures struct {
	start, restart   time.Duration
	startCPU         time.Duration // the processor time of the start
	idleRSS, peakRSS float64
	idleAnon         float64 // the process's own pages, without mapped files
	loadAnon         float64 // the process's own pages at the end of the load
	quietAnon        float64 // and once the process has been quiet for afterLoad
	perSecond        float64
	cpuPerMsg        time.Duration
}

// serveFakes are the fakes a benchmarked process talks to.
type serveFakes struct {
	tg    *telegramtest.Server
	model *chattest.ModelServer
}

func newServeFakes(b *testing.B) serveFakes {
	model := chattest.NewModelServer(b)
	model.Fallback = "An answer with **some** formatting."
	return serveFakes{tg: telegramtest.New(b), model: model}
}

// config writes dir/config.yaml for a process on the fakes with its
// store in dir, -serve.chats allowed users and pprof on listen (none for
// ""), and returns its path.
func (f serveFakes) config(b *testing.B, dir, listen string) string {
	b.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	users := make([]string, *benchChats)
	for i := range users {
		users[i] = strconv.Itoa(1000 + i)
	}
	pprof := listen != ""
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-bench\nstore:\n  path: %s\nhttp:\n  listen: %s\n  pprof: %t\n"+
		"log:\n  level: warn\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n"+
		"  send_per_second: -1\n  send_per_chat_second: -1\n  send_per_group_minute: -1\n",
		f.model.URL, filepath.Join(dir, "loadout.db"), cmp.Or(listen, "127.0.0.1:0"), pprof, telegramtest.Token, f.tg.Endpoint(), strings.Join(users, ", "))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// start runs `bin serve -config path` and waits for its first
// getUpdates. It returns the process, the time from its start, and the
// processor time its threads used until then.
func (f serveFakes) start(b *testing.B, bin, path string) (*exec.Cmd, time.Duration, time.Duration) {
	b.Helper()
	polls := len(f.tg.Calls("getUpdates"))
	cmd := exec.Command(bin, "serve", "-config", path)
	cmd.Dir = filepath.Dir(path)
	cmd.Stderr = os.Stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	f.tg.WaitFor(b, "the first getUpdates", func() bool { return len(f.tg.Calls("getUpdates")) > polls })
	took := time.Since(began)
	return cmd, took, threadsCPU(b, cmd.Process.Pid)
}

// stop interrupts cmd and waits for it to exit cleanly.
func stop(b *testing.B, cmd *exec.Cmd) {
	b.Helper()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("loadout did not stop cleanly: %v", err)
	}
}

func runServe(b *testing.B, bin, dir string) serveFigures {
	b.Helper()
	fakes := newServeFakes(b)
	tg := fakes.tg
	chats, per := *benchChats, *benchMessages
	listen := ""
	if *benchProfile != "" {
		listen = freeAddr(b)
	}
	path := fakes.config(b, dir, listen)
	var f serveFigures
	cmd, took, cpu := fakes.start(b, bin, path)
	f.start, f.startCPU = took, cpu
	// Idle: let start-up garbage be collected as it would be.
	time.Sleep(2 * time.Second)
	f.idleRSS = procStatus(b, cmd.Process.Pid, "VmRSS")
	f.idleAnon = procStatus(b, cmd.Process.Pid, "RssAnon")

	profiled := make(chan struct{})
	if *benchProfile != "" {
		if sm, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", cmd.Process.Pid)); err == nil {
			os.WriteFile(filepath.Join(*benchProfile, filepath.Base(bin)+"-idle.smaps"), sm, 0o644)
		}
		saveProfile(b, listen, "heap?debug=1", filepath.Base(bin)+"-idle-heap.txt")
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
	cpu = procCPU(b, cmd.Process.Pid) - cpu0
	f.perSecond = float64(total) / took.Seconds()
	f.cpuPerMsg = cpu / time.Duration(total)
	f.peakRSS = procStatus(b, cmd.Process.Pid, "VmHWM")
	f.loadAnon = procStatus(b, cmd.Process.Pid, "RssAnon")
	if *benchProfile != "" {
		saveProfile(b, listen, "heap", "load-heap.pprof")
		saveProfile(b, listen, "allocs", "allocs.pprof")
		<-profiled
	}
	time.Sleep(afterLoad)
	f.quietAnon = procStatus(b, cmd.Process.Pid, "RssAnon")
	// A restart: the binary is in the page cache and the database exists.
	stop(b, cmd)
	cmd, f.restart, _ = fakes.start(b, bin, path)
	stop(b, cmd)
	return f
}

// afterLoad is how long the benchmark waits after the load before it
// reads the memory a quiet process keeps.
const afterLoad = 5 * time.Second

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

// threadsCPU is the time the process's threads have run, to the
// nanosecond (procCPU counts in hundredths of a second).
func threadsCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Skipf("no /proc here: %v", err)
	}
	var sum time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread has exited
		}
		ns, _ := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		sum += time.Duration(ns)
	}
	return sum
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
func freeAddr(b testing.TB) string {
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
