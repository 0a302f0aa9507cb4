package bridgetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// A gate lets the first calls through, holds the rest until Release,
// counts what it holds, and reports a held call whose client gave up.
func TestGateHoldsAndReleases(t *testing.T) {
	var g Gate
	ctx := context.Background()
	if !g.Pass(ctx, "send") {
		t.Fatal("nothing held, yet the call did not pass")
	}
	g.Hold("send", 1)
	if !g.Pass(ctx, "send") {
		t.Fatal("the first call after Hold(1) was held")
	}
	var passed sync.WaitGroup
	results := make(chan bool, 2)
	for range 2 {
		passed.Go(func() { results <- g.Pass(ctx, "send") })
	}
	WaitFor(t, "two held calls", &g.Signal, func() bool { return g.Waiting("send") == 2 })
	if !g.Pass(ctx, "other") {
		t.Fatal("a call of another key was held")
	}
	gone, cancel := context.WithCancel(ctx)
	abandoned := make(chan bool, 1)
	go func() { abandoned <- g.Pass(gone, "send") }()
	WaitFor(t, "three held calls", &g.Signal, func() bool { return g.Waiting("send") == 3 })
	cancel()
	if <-abandoned {
		t.Fatal("a call whose client gave up passed")
	}
	g.Release("send")
	passed.Wait()
	for range 2 {
		if !<-results {
			t.Fatal("a released call did not pass")
		}
	}
	if g.Waiting("send") != 0 || !g.Pass(ctx, "send") {
		t.Fatal("the gate still holds after Release")
	}
}

// A recorder keeps what it was given in order, and WaitFor wakes on its
// additions.
func TestRecorderAndWaitFor(t *testing.T) {
	var r Recorder[string]
	go func() {
		for _, s := range []string{"a", "b", "c"} {
			r.Add(s)
		}
	}()
	WaitFor(t, "three calls", &r.Signal, func() bool { return r.Len() == 3 })
	if got := r.All(); len(got) != 3 || got[0] != "a" || got[2] != "c" {
		t.Fatalf("recorded %q", got)
	}
	if got := r.Filter(func(s string) bool { return s != "b" }); len(got) != 2 || got[1] != "c" {
		t.Fatalf("filtered %q", got)
	}
}

func TestFakesGiveEachTestItsOwn(t *testing.T) {
	var f Fakes[*int]
	made := 0
	newFake := func(testing.TB) *int { made++; n := made; return &n }
	var first *int
	t.Run("one", func(t *testing.T) {
		first = f.For(t, newFake)
		if f.For(t, newFake) != first || f.Fake() != first || f.Owner() != t {
			t.Fatal("a test asking again got another fake")
		}
	})
	t.Run("two", func(t *testing.T) {
		if second := f.For(t, newFake); second == first || *second != 2 {
			t.Fatalf("the next test got fake %d, want a new one", *second)
		}
	})
}

type runFunc func(context.Context) error

func (r runFunc) Run(ctx context.Context) error { return r(ctx) }

func TestRunningStopsTheChannel(t *testing.T) {
	var ended atomic.Bool
	stop := Running(t, runFunc(func(ctx context.Context) error {
		<-ctx.Done()
		ended.Store(true)
		return ctx.Err() // a cancellation is no failure
	}))
	stop()
	if !ended.Load() {
		t.Fatal("stop returned before Run did")
	}
	stop() // again: nothing
}
