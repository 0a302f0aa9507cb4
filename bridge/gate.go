package bridge

import (
	"context"
	"sync"
	"time"
)

// Gate lets a turn run alone in its process. A process that ends under
// its turns — a crash no recover catches, an out-of-memory kill, a
// SIGKILL from a deploy or a node going away, a crash loop with another
// cause — cannot tell which of the turns in flight, if any, was to
// blame. A turn that was in flight at such an end runs again alone: it
// waits until the process has lived Settle (a process killed from
// outside soon after it starts, again and again, is not caught running
// it), then until no other turn runs, and none starts until it is over.
// Only the ends of those lone runs are held against it (see
// PipelineConfig.MaxStarts), so an innocent message in flight at a kill
// from outside is not set aside for it, while a message that itself ends
// the process ends it each time it runs alone.
//
// Every pipeline of a process shares one Gate (Delivery.Gate): "alone"
// means alone in the process, whatever the channel. It is safe for
// concurrent use.
type Gate struct {
	mu      sync.RWMutex
	settled time.Time
}

// DefaultSettle is how long a process lives before it runs a turn alone.
const DefaultSettle = 2 * time.Second

// NewGate returns a process's Gate; settle is how long after now a lone
// turn may start, default DefaultSettle (negative: at once).
func NewGate(settle time.Duration) *Gate {
	if settle == 0 {
		settle = DefaultSettle
	}
	return &Gate{settled: time.Now().Add(max(settle, 0))}
}

// enter waits until the turn may run, alone or beside others, and
// returns the function that lets the others go on. It returns ctx's
// error if ctx ends first.
func (g *Gate) enter(ctx context.Context, alone bool) (leave func(), err error) {
	if !alone {
		g.mu.RLock()
		return g.mu.RUnlock, nil
	}
	if wait := time.Until(g.settled); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	g.mu.Lock()
	return g.mu.Unlock, nil
}
