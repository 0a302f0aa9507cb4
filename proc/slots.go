package proc

import (
	"context"
	"runtime"
	"sync"
)

// Slots bound how many children of one kind run at once across the
// process, whoever starts them: a caller takes a place (Take) before it
// starts its child and gives it back (Give) once the child has ended.
// loadout makes one Slots per kind — PDF workers (pdf.max_workers),
// exec commands (exec.max_running) — and hands it to every caller of
// that kind. MCP servers' keepers take none: there is one for each
// server the operator lists, started once. Safe for concurrent use.
type Slots struct {
	free chan struct{}
	mu   sync.Mutex
	// running and peak are the places taken now and the most ever
	// taken at once.
	running, peak int
}

// NewSlots returns n places; n below 1 is the number of CPUs.
func NewSlots(n int) *Slots {
	if n < 1 {
		n = runtime.NumCPU()
	}
	s := &Slots{free: make(chan struct{}, n)}
	for range n {
		s.free <- struct{}{}
	}
	return s
}

// Max is how many children may run at once.
func (s *Slots) Max() int { return cap(s.free) }

// Peak is the most places ever taken at once.
func (s *Slots) Peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Take waits for a place until ctx ends, and then returns ctx's error.
func (s *Slots) Take(ctx context.Context) error {
	select {
	case <-s.free:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	s.running++
	s.peak = max(s.peak, s.running)
	s.mu.Unlock()
	return nil
}

// Give returns a place taken.
func (s *Slots) Give() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.free <- struct{}{}
}
