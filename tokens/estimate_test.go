package tokens

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpus is text of the kinds loadout sends a model: its own README and
// docs (prose, Markdown, tables, shell), its config (YAML), Go code (tool
// results when a person works on code), and the conversation fixtures
// (chat messages, tool calls and JSON tool results).
func corpus(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, p := range []string{"../README.md", "../docs/BENCHMARKS.md", "../config.yaml", "../chat/engine.go", "../bridge/pipeline.go", "testdata/conversation.txt"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = string(b)
	}
	return files
}

// The estimate stays within 15 % of o200k over the corpus, and within
// 25 % on each kind of text.
func TestEstimateTracksO200k(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	var exactSum, estSum int
	for name, text := range corpus(t) {
		exact, est := c.Count(text), Estimate(text)
		exactSum += exact
		estSum += est
		errPct := 100 * float64(est-exact) / float64(exact)
		t.Logf("%-20s o200k %6d  estimate %6d  %+5.1f%%", name, exact, est, errPct)
		if math.Abs(errPct) > 25 {
			t.Errorf("%s: estimate %d is %.1f%% off o200k's %d", name, est, errPct, exact)
		}
	}
	total := 100 * float64(estSum-exactSum) / float64(exactSum)
	t.Logf("%-20s o200k %6d  estimate %6d  %+5.1f%%", "all", exactSum, estSum, total)
	if math.Abs(total) > 15 {
		t.Errorf("over the corpus the estimate is %.1f%% off", total)
	}
}

func TestEstimateSmallCases(t *testing.T) {
	for s, want := range map[string]int{"": 0, "hello world": 2, "Hello, world!": 4} {
		if got := Estimate(s); got != want {
			t.Errorf("Estimate(%q) = %d, want %d", s, got, want)
		}
	}
	// Scripts without spaces are not one token per "word".
	if got := Estimate(strings.Repeat("日本語", 100)); got < 150 {
		t.Errorf("300 Han characters estimated at %d tokens", got)
	}
}
