package bridge

import (
	"context"
	"sync"
	"time"
)

// Pool runs jobs with bounded concurrency, one at a time and in submission
// order per key (a chat), different keys in parallel. Channels submit one
// job per inbound message. Jobs receive a context that outlives the
// channel's intake and is cancelled only when Drain's grace period runs
// out, so a stop signal lets in-flight turns finish.
type Pool struct {
	sem    chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	queues map[string][]func(context.Context)
	closed bool
}

// NewPool returns a pool running at most workers jobs at once.
func NewPool(workers int) *Pool {
	if workers < 1 {
		workers = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{sem: make(chan struct{}, workers), ctx: ctx, cancel: cancel, queues: map[string][]func(context.Context){}}
}

// Submit queues job under key. It reports false, dropping the job, once
// Drain has been called.
func (p *Pool) Submit(key string, job func(ctx context.Context)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	q, running := p.queues[key]
	p.queues[key] = append(q, job)
	p.wg.Add(1)
	if !running {
		go p.drainKey(key)
	}
	return true
}

func (p *Pool) drainKey(key string) {
	for {
		p.mu.Lock()
		q := p.queues[key]
		if len(q) == 0 {
			delete(p.queues, key)
			p.mu.Unlock()
			return
		}
		job := q[0]
		p.queues[key] = q[1:]
		p.mu.Unlock()

		p.sem <- struct{}{}
		job(p.ctx)
		<-p.sem
		p.wg.Done()
	}
}

// Drain stops intake and waits for queued and running jobs. After grace
// it cancels their context and waits for them to return.
func (p *Pool) Drain(grace time.Duration) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.cancel()
		<-done
	}
	p.cancel()
}

// Sleep waits for d or until ctx is done, whichever comes first, and
// returns ctx.Err() in the second case. Channels use it for backoff.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
