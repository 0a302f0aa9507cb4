package bridge

import (
	"context"
	"sync"
	"time"
)

// FirstSignWait bounds how long a turn waits for the first sign that an
// answer is on its way (see Renew).
const FirstSignWait = 2 * time.Second

// Renew shows a sign of work (a platform's "typing…", which fades by
// itself) until stop is called: the first sign is sent before Renew
// returns, so it lands before the answer however short the turn (a slow
// platform holds the turn back by at most FirstSignWait), then it is
// sent again every interval. stop waits for the renewals to end and may
// be called more than once. An Indicator's Working is one call of it.
func Renew(ctx context.Context, every time.Duration, sign func(ctx context.Context)) (stop func()) {
	first, cancelFirst := context.WithTimeout(ctx, FirstSignWait)
	sign(first)
	cancelFirst()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sign(ctx)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(cancel); <-done }
}
