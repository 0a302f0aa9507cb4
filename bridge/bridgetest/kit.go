package bridgetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The kit: what every platform's fake needs besides the platform's own
// behaviour — a record of the calls it was sent, a gate that holds calls
// on their way, and a wait on either. A fake keeps only what its
// platform does.

// Signal wakes everyone waiting for a change of a fake's state. The
// zero value is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// C is closed at the next Notify.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes every C taken before it.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// WaitFor waits until cond holds, checking it at every Notify of s (nil:
// none) and on a short tick, since cond may watch something besides the
// fake (a metric, a row); it fails the test after Wait, naming what.
func WaitFor(t testing.TB, what string, s *Signal, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(Wait)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var changed <-chan struct{}
	for {
		if s != nil {
			changed = s.C() // taken before cond: a change after it wakes us
		}
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s did not happen within %s", what, Wait)
		}
	}
}

// Recorder keeps, in order, what a fake was sent, and signals each
// addition. The zero value is ready to use.
type Recorder[T any] struct {
	Signal
	mu    sync.Mutex
	items []T
}

// Add records v and notifies.
func (r *Recorder[T]) Add(v T) {
	r.mu.Lock()
	r.items = append(r.items, v)
	r.mu.Unlock()
	r.Notify()
}

// All returns a copy of what was recorded, in order.
func (r *Recorder[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

// Filter returns, in order, what was recorded and keep accepts.
func (r *Recorder[T]) Filter(keep func(T) bool) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, v := range r.items {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// Len is how many were recorded.
func (r *Recorder[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

// Gate holds a fake's calls on their way, by key (a method's name, or ""
// for one gate over every call), so a test can stop a process in the
// middle of sending or see what it does while a call hangs. The zero
// value holds nothing.
type Gate struct {
	Signal
	mu    sync.Mutex
	holds map[string]*hold
}

type hold struct {
	after   int           // calls still let through before holding
	release chan struct{} // closed by Release
	waiting int
}

// Hold lets the next after calls of key through and holds later ones
// until Release.
func (g *Gate) Hold(key string, after int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holds == nil {
		g.holds = map[string]*hold{}
	}
	if h, ok := g.holds[key]; ok {
		h.after = after
		return
	}
	g.holds[key] = &hold{after: after, release: make(chan struct{})}
}

// Release lets held and later calls of key through.
func (g *Gate) Release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h, ok := g.holds[key]; ok {
		close(h.release)
		delete(g.holds, key)
	}
}

// Waiting counts the calls of key held now.
func (g *Gate) Waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h, ok := g.holds[key]; ok {
		return h.waiting
	}
	return 0
}

// Held reports whether the next call of key is to be held, counting it
// against Hold's after; the call then waits with Wait on the channel it
// returns.
func (g *Gate) Held(key string) (release <-chan struct{}, held bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h, ok := g.holds[key]
	if !ok {
		return nil, false
	}
	if h.after > 0 {
		h.after--
		return nil, false
	}
	return h.release, true
}

// Wait holds a call of key until release is closed, counted in Waiting;
// false when ctx (the client's request, or the fake closing) ends
// first: the call was abandoned.
func (g *Gate) Wait(ctx context.Context, key string, release <-chan struct{}) bool {
	g.count(key, release, 1)
	defer g.count(key, release, -1)
	select {
	case <-release:
		return true
	case <-ctx.Done():
		return false
	}
}

// count adds d to the waiting calls of key's hold, while it is the one
// release belongs to, and notifies.
func (g *Gate) count(key string, release <-chan struct{}, d int) {
	g.mu.Lock()
	if h, ok := g.holds[key]; ok && h.release == release {
		h.waiting += d
	}
	g.mu.Unlock()
	g.Notify()
}

// Pass is Held and Wait in one: true when the call of key may go on,
// false when it was abandoned while held.
func (g *Gate) Pass(ctx context.Context, key string) bool {
	release, held := g.Held(key)
	return !held || g.Wait(ctx, key, release)
}

// Running runs ch as a process does until the test ends or stop is
// called: stop cancels Run and waits for it to return, failing the test
// when it does not within Wait, or returns an error other than the
// cancellation. Calling stop again does nothing.
func Running(t testing.TB, ch interface{ Run(context.Context) error }) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v after cancel", err)
			}
		case <-time.After(Wait):
			t.Error("Run did not return after cancel")
		}
	})
	t.Cleanup(stop)
	return stop
}

// Fakes keeps the platform fake of the suite's current case, for a
// harness: the suite runs each case as a test of its own, which gets a
// fake of its own. A harness embeds it; its methods given a test reach
// the fake with For, the others with Fake.
type Fakes[S any] struct {
	mu    sync.Mutex
	owner *testing.T
	fake  S
}

// For is t's fake, made by newFake the first time t asks.
func (f *Fakes[S]) For(t *testing.T, newFake func(testing.TB) S) S {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner != t {
		f.fake, f.owner = newFake(t), t
	}
	return f.fake
}

// Fake is the current case's fake.
func (f *Fakes[S]) Fake() S {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fake
}

// Owner is the current case's test.
func (f *Fakes[S]) Owner() *testing.T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owner
}

// Holder is a fake whose gate holds the bot's sends on their way, under
// one key: Hold holds those after the next n, Waiting counts the held,
// Release lets them through.
type Holder interface {
	Hold(after int)
	Waiting() int
	Release()
}

// holder is the current fake as a Holder; a harness whose fake is none
// (or holds by method) has Hold, Held and Release of its own.
func (f *Fakes[S]) holder() Holder {
	h, ok := any(f.Fake()).(Holder)
	if !ok {
		panic(fmt.Sprintf("bridgetest: the fake %T holds no sends: give the harness Hold, Held and Release of its own", f.Fake()))
	}
	return h
}

// Hold is the suite's Hold on a Holder fake.
func (f *Fakes[S]) Hold(n int) { f.holder().Hold(n) }

// Held is the suite's Held on a Holder fake.
func (f *Fakes[S]) Held() int { return f.holder().Waiting() }

// Release waits until the send a stop abandoned has ended, so it is not
// let through after the fact, then lets sends through.
func (f *Fakes[S]) Release() {
	h := f.holder()
	WaitFor(f.Owner(), "the abandoned send to end", nil, func() bool { return h.Waiting() == 0 })
	h.Release()
}
