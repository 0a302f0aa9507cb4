package browser

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// small is a small page the benchmarks open, on an allowed host.
func small(b *testing.B) string {
	s := serve(b, html(`<!doctype html><title>Small</title><h1>A small page</h1><p>Some text.</p><a href="/next">Next</a>`))
	return "http://good.test:" + s.port() + "/"
}

// Opening a small page in a new browser, reading it and closing the
// browser: what a chat's first and last call cost.
func BenchmarkOpenReadClose(b *testing.B) {
	m, url := manager(b, Config{}), small(b)
	for b.Loop() {
		if _, err := call(b, m, "bench:1", map[string]any{"action": "open", "url": url}); err != nil {
			b.Fatal(err)
		}
		if _, err := call(b, m, "bench:1", map[string]any{"action": "close"}); err != nil {
			b.Fatal(err)
		}
	}
}

// Reading the page again in a running browser (scroll): what each later
// call costs.
func BenchmarkReadOpenPage(b *testing.B) {
	m, url := manager(b, Config{}), small(b)
	if _, err := call(b, m, "bench:1", map[string]any{"action": "open", "url": url}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := call(b, m, "bench:1", map[string]any{"action": "scroll"}); err != nil {
			b.Fatal(err)
		}
	}
}

// The memory of one idle chat's browser, a small page open: the sum of
// its processes' proportional set sizes (PSS, shared pages divided among
// those sharing them) and of their resident sets (RSS, shared pages
// counted in each).
func BenchmarkIdleBrowserMemory(b *testing.B) {
	m, url := manager(b, Config{}), small(b)
	if _, err := call(b, m, "bench:1", map[string]any{"action": "open", "url": url}); err != nil {
		b.Fatal(err)
	}
	dir := m.Profile("bench:1")
	var pss, rss int
	for b.Loop() {
		pss, rss = memoryOf(dir)
	}
	b.ReportMetric(float64(pss)/1024, "PSS-MB")
	b.ReportMetric(float64(rss)/1024, "RSS-MB")
}

// memoryOf sums, in KB, the PSS and RSS of the processes whose command
// line holds marker.
func memoryOf(marker string) (pss, rss int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if !bytes.Contains(cmd, []byte(marker)) {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "smaps_rollup"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			v, _ := strconv.Atoi(fields[1])
			switch fields[0] {
			case "Pss:":
				pss += v
			case "Rss:":
				rss += v
			}
		}
		f.Close()
	}
	return pss, rss
}
