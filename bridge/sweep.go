package bridge

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// sweep tries unfinished events again every RetryEvery and forgets
// finished ones after Keep, until Stop, which waits for it.
func (p *Pipeline) sweep() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.RetryEvery)
	defer t.Stop()
	p.prune()
	lastPrune := time.Now()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		p.mu.Lock()
		p.ranSince = map[int64]bool{}
		p.mu.Unlock()
		items, err := p.cfg.Inbox.Unfinished(p.ctx, p.cfg.Channel)
		p.mu.Lock()
		ran := p.ranSince
		p.ranSince = nil
		if err == nil && !p.stopped {
			for _, it := range items {
				// An event that ran while the inbox was read is left to the
				// next sweep, which reads it as it is now.
				if !ran[it.Seq] {
					p.enqueue(job{it: it, resume: true})
				}
			}
		}
		p.mu.Unlock()
		if err != nil {
			p.log.Warn("delivery: cannot read the inbox to retry messages", "channel", p.cfg.Channel, "err", err)
			continue
		}
		if time.Since(lastPrune) > time.Hour {
			p.prune()
			lastPrune = time.Now()
		}
	}
}

func (p *Pipeline) prune() {
	p.pace.forget(10 * time.Minute)
	n, err := p.cfg.Inbox.Prune(p.ctx, time.Now().Add(-p.cfg.Keep))
	if err != nil {
		p.log.Warn("delivery: cannot prune the inbox", "err", err)
	} else if n > 0 {
		p.log.Debug("delivery: pruned finished events", "channel", p.cfg.Channel, "count", n)
	}
}

// newRef returns a short random reference id.
func newRef() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
