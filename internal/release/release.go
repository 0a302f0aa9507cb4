// Package release gives a process's memory back to the system once a
// burst of work is over.
//
// Go's runtime keeps the heap it grew for a burst (a hundred chats
// answered at once) and returns it only slowly, and not the part that
// sits in spans still partly in use: measured after 600 messages,
// loadout held 16.6 MB of its own memory five seconds after the last
// answer, against 6.8 MB before the burst. SQLite's C allocator keeps
// its free pages for good. A self-hosted assistant spends most of its
// life idle between bursts, so Watch looks once a second: when the
// process has gone quiet (it allocated little since the last look) and
// its heap holds at least Above more than the last release left, it
// calls release: a collection and the free pages returned at once.
//
// A process that stays busy is never interrupted (it is not quiet), and
// an idle one releases only after its heap has grown by Above, which
// idle work (a long poll, a lease renewed) takes hours to allocate.
package release

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// Every is how often Watch looks.
	Every = time.Second
	// Above is how much the heap must hold beyond what the last
	// release left before another is worth a collection.
	Above = 2 << 20
	// Quiet is what a process may allocate between two looks and
	// still be quiet: an idle loadout allocates a few kilobytes a
	// second; a turn, about a hundred kilobytes.
	Quiet = 64 << 10
)

// Sample is what Watch reads of the runtime at each look.
type Sample struct {
	// Allocated is the bytes allocated since the process started.
	Allocated uint64
	// Held is the heap's bytes not returned to the system: objects,
	// free and unused space in spans, and goroutine stacks.
	Held uint64
}

// names are the runtime metrics a Sample is made of, Allocated first.
var names = []string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/stacks:bytes",
}

// Read samples the runtime.
func Read() Sample {
	m := make([]metrics.Sample, len(names))
	for i, n := range names {
		m[i].Name = n
	}
	metrics.Read(m)
	s := Sample{Allocated: m[0].Value.Uint64()}
	for _, v := range m[1:] {
		s.Held += v.Value.Uint64()
	}
	return s
}

// State is what Watch remembers between looks.
type State struct {
	last Sample
	// base is what the heap held after the last release (or the
	// least it has held since).
	base uint64
}

// Start is the state of a process whose heap was just settled (s read
// after a release, or at start).
func Start(s Sample) State { return State{last: s, base: s.Held} }

// Due reports whether a release is due at sample s, and moves st on.
func (st *State) Due(s Sample) bool {
	quiet := s.Allocated-st.last.Allocated < Quiet
	st.last = s
	st.base = min(st.base, s.Held)
	return quiet && s.Held >= st.base+Above
}

// Released records the sample read after a release.
func (st *State) Released(s Sample) { *st = Start(s) }

// Watch releases memory at once (what the start built and dropped), then
// looks every Every until ctx ends and releases whenever a release is
// due, calling released after each of these. A release is one
// collection, the runtime's free pages returned to the system, and then
// giveBack (the C allocator's, SQLite's). Call it once the process has
// started.
func Watch(ctx context.Context, giveBack, released func()) {
	free := func() {
		debug.FreeOSMemory()
		giveBack()
	}
	free()
	st := Start(Read())
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if st.Due(Read()) {
			free()
			released()
			st.Released(Read())
		}
	}
}
