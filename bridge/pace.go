package bridge

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Pacing paces a channel's sends by the platform's published limits, so a
// burst of answers never turns into rate-limit refusals and retry storms.
// The zero value sends unpaced.
type Pacing struct {
	// Global bounds every send of the channel; zero means no bound.
	Global rate.Limit
	// GlobalBurst is how many sends may go at once; at least 1.
	GlobalBurst int
	// PerChat names the chat a route sends to and that chat's limit;
	// a zero limit (or a nil PerChat) means no bound for the chat.
	PerChat func(route any) (key string, limit rate.Limit, burst int)
}

// pacer holds a channel's limiters; per-chat ones are created on first
// use and forgotten when idle.
type pacer struct {
	cfg    Pacing
	global *rate.Limiter

	mu    sync.Mutex
	chats map[string]*chatLimiter
}

type chatLimiter struct {
	l    *rate.Limiter
	used time.Time
}

func newPacer(cfg Pacing) *pacer {
	p := &pacer{cfg: cfg, chats: map[string]*chatLimiter{}}
	if cfg.Global > 0 {
		p.global = rate.NewLimiter(cfg.Global, max(cfg.GlobalBurst, 1))
	}
	return p
}

// wait blocks until a send to route is within the limits, or ctx ends.
func (p *pacer) wait(ctx context.Context, route any) error {
	if p.cfg.PerChat != nil {
		if key, limit, burst := p.cfg.PerChat(route); limit > 0 {
			p.mu.Lock()
			c, ok := p.chats[key]
			if !ok {
				c = &chatLimiter{l: rate.NewLimiter(limit, max(burst, 1))}
				p.chats[key] = c
			}
			c.used = time.Now()
			p.mu.Unlock()
			if err := c.l.Wait(ctx); err != nil {
				return err
			}
		}
	}
	if p.global != nil {
		return p.global.Wait(ctx)
	}
	return nil
}

// forget drops the limiters of chats idle for longer than idle: a limiter
// that has refilled holds no state worth keeping.
func (p *pacer) forget(idle time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.chats {
		if time.Since(c.used) > idle {
			delete(p.chats, k)
		}
	}
}
