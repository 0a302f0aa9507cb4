package bridge

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultDraftEvery is how often a draft is edited at most.
const DefaultDraftEvery = time.Second

// drafter shows one turn's answer as it streams. The model's goroutine
// hands it the text so far; its own goroutine posts the first draft at
// once and then edits it at most every DraftEvery (and as the channel's
// pacing allows), always with the newest text. The draft's reference is
// stored with the event as soon as it exists, so after a crash the next
// start replaces the half-written draft with the answer.
type drafter struct {
	p     *Pipeline
	out   Drafter
	route any
	seq   int64
	log   *slog.Logger

	mu   sync.Mutex
	text string
	ref  []byte

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func (p *Pipeline) newDrafter(ctx context.Context, out Drafter, it Item, route any, log *slog.Logger) *drafter {
	d := &drafter{p: p, out: out, route: route, seq: it.Seq, log: log, ref: it.Draft,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go d.loop(ctx)
	return d
}

// update takes the text so far; it never blocks.
func (d *drafter) update(text string) {
	d.mu.Lock()
	d.text = text
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// close stops drafting and returns the draft's reference, nil if none
// was posted.
func (d *drafter) close() []byte {
	close(d.stop)
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ref
}

func (d *drafter) loop(ctx context.Context) {
	defer close(d.done)
	var shown string
	var next time.Time
	for {
		select {
		case <-d.wake:
		case <-d.stop:
			return
		}
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-d.stop:
				t.Stop()
				return
			}
		}
		if d.p.pace.wait(ctx, d.route) != nil {
			return
		}
		d.mu.Lock()
		text, ref := d.text, d.ref
		d.mu.Unlock()
		if text == shown {
			continue
		}
		next = time.Now().Add(d.p.cfg.DraftEvery)
		got, err := d.out.Draft(ctx, d.route, ref, text)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("delivery: could not show the answer so far", "err", err)
			}
			continue
		}
		shown = text
		if ref == nil && got != nil {
			d.mu.Lock()
			d.ref = got
			d.mu.Unlock()
			d.p.write(ctx, d.log, "store the draft", func(ctx context.Context) error {
				return d.p.cfg.Inbox.Drafted(ctx, d.seq, got)
			})
		}
	}
}
