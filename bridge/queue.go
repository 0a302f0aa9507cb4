package bridge

import (
	"context"
	"errors"
	"time"
)

// Each chat's queue of events in a process: run in order, one at a
// time, the chats side by side (bounded by Workers).

type job struct {
	it     Item
	resume bool
	// checked: whether the event answers a question was asked already.
	checked bool
	// aside: an answer to send now, beside the chat's queue (a /status
	// while a turn runs), not after what waits there.
	aside bool
}

// fresh reports whether j is a new event not yet checked as an answer.
func (j *job) fresh() bool { return !j.resume && !j.checked }

// enqueue queues j behind its chat's earlier events; p.mu must be held.
func (p *Pipeline) enqueue(j job) {
	if p.active[j.it.Seq] {
		return
	}
	p.active[j.it.Seq] = true
	p.wg.Add(1)
	key := j.it.Inbound.ChatKey
	if j.aside {
		key += "\x00aside"
	}
	if j.resume {
		p.resumes[key]++
	}
	q, running := p.queues[key]
	p.queues[key] = append(q, j)
	if !running {
		go p.drain(key)
	}
}

// unresume counts off one of chatKey's resumes; p.mu must be held.
func (p *Pipeline) unresume(chatKey string) {
	if p.resumes[chatKey]--; p.resumes[chatKey] <= 0 {
		delete(p.resumes, chatKey)
	}
}

// drain runs one chat's queue in order, one event at a time.
func (p *Pipeline) drain(key string) {
	for {
		p.mu.Lock()
		q := p.queues[key]
		if len(q) == 0 {
			delete(p.queues, key)
			p.mu.Unlock()
			return
		}
		j := q[0]
		p.queues[key] = q[1:]
		out := p.out
		p.mu.Unlock()

		var err error
		if p.ctx.Err() != nil {
			err = p.ctx.Err() // cut at shutdown before it began
		} else {
			p.sem <- struct{}{}
			if p.cfg.Claim != nil {
				err = p.claimed(p.ctx, out, &j)
			} else {
				err = p.run(p.ctx, out, j)
			}
			<-p.sem
		}
		if errors.Is(err, errClaimed) {
			// Another process has the chat: this event waits its turn.
			p.mu.Lock()
			delete(p.active, j.it.Seq)
			if j.resume {
				p.unresume(key)
			}
			p.retrying++
			p.mu.Unlock()
			p.wg.Done()
			time.AfterFunc(claimRetry, func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.retrying--
				if !p.stopped {
					p.enqueue(j)
				}
				p.calmer()
			})
			continue
		}
		p.mu.Lock()
		delete(p.active, j.it.Seq)
		if j.resume {
			p.unresume(key)
		}
		if p.ranSince != nil {
			p.ranSince[j.it.Seq] = true
		}
		ws := p.waiters[j.it.Seq]
		delete(p.waiters, j.it.Seq)
		p.calmer()
		p.mu.Unlock()
		for _, w := range ws {
			w <- err
		}
		p.wg.Done()
	}
}

// Idle waits until this process's pipeline has no event queued,
// running, or waiting to be tried again after another process had its
// chat: whatever it took on is done (answered, told, or failed), and it
// sends nothing more until a new event comes. It returns ctx's error if
// ctx ends first.
func (p *Pipeline) Idle(ctx context.Context) error {
	for {
		p.mu.Lock()
		busy := len(p.active) + p.retrying
		if p.quiet == nil {
			p.quiet = make(chan struct{})
		}
		quiet := p.quiet
		p.mu.Unlock()
		if busy == 0 {
			return nil
		}
		select {
		case <-quiet:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// calmer wakes Idle after an event left active or retrying; p.mu must
// be held.
func (p *Pipeline) calmer() {
	if p.quiet != nil {
		close(p.quiet)
		p.quiet = nil
	}
}
