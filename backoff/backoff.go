// Package backoff is loadout's one retry helper: exponential waits with
// optional jitter, a cap, and a server's own wait (Retry-After,
// retry_after) honoured when it gives one. The channels, the model client
// and the Google groups all retry through it. It imports only the
// standard library, so any package may use it.
package backoff

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Policy says how often and how long to retry. The zero value retries
// until the context ends, waiting 1s, 2s, 4s … up to 1m.
type Policy struct {
	// Attempts is the total number of tries; zero or less means no limit
	// (until ctx ends or the error is final).
	Attempts int
	// Initial is the first wait; each further wait doubles it. Default 1s.
	Initial time.Duration
	// Max caps one wait, including one a server asks for. Default 1m.
	Max time.Duration
	// Jitter adds up to this fraction of each exponential wait at random
	// (0.25 adds up to a quarter). Zero waits exactly.
	Jitter float64
	// Sleep waits d or until ctx ends; default Sleep. Tests replace it to
	// record waits without waiting.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry, when set, is called before each wait of Do with the error
	// that is retried and the wait (for metrics and logs).
	OnRetry func(err error, wait time.Duration)
}

// Classify tells Do whether a failed attempt may succeed if repeated, and
// how long the server asked to wait first (zero if it did not say).
type Classify func(err error) (retry bool, after time.Duration)

// Always treats every error as worth another attempt.
func Always(error) (bool, time.Duration) { return true, 0 }

// Do calls fn until it succeeds, fails with an error classify calls final,
// the attempts are used up, or ctx ends. It returns fn's last error (nil
// on success). A wait the server asked for is used as is (capped at Max)
// and does not advance the exponential schedule.
func (p Policy) Do(ctx context.Context, classify Classify, fn func(ctx context.Context) error) error {
	b := p.New()
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		retry, after := classify(err)
		if !retry || ctx.Err() != nil || (p.Attempts > 0 && attempt >= p.Attempts) {
			return err
		}
		wait := after
		if wait > 0 {
			wait = min(wait, b.max())
		} else {
			wait = b.Next()
		}
		if p.OnRetry != nil {
			p.OnRetry(err, wait)
		}
		if b.Wait(ctx, wait) != nil {
			return err
		}
	}
}

// Backoff is the running state of a Policy, for loops that retry on their
// own terms (a poll loop that resets after a success). It is not safe for
// concurrent use.
type Backoff struct {
	p   Policy
	cur time.Duration
}

// New returns the policy's schedule, starting at Initial.
func (p Policy) New() *Backoff { return &Backoff{p: p} }

func (b *Backoff) initial() time.Duration {
	if b.p.Initial > 0 {
		return b.p.Initial
	}
	return time.Second
}

func (b *Backoff) max() time.Duration {
	if b.p.Max > 0 {
		return b.p.Max
	}
	return time.Minute
}

// Next returns the next wait: Initial, then doubled each time up to Max,
// with the policy's jitter added.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.initial()
	} else {
		b.cur *= 2
	}
	b.cur = min(b.cur, b.max())
	d := b.cur
	if b.p.Jitter > 0 {
		d += rand.N(time.Duration(float64(d)*b.p.Jitter) + 1)
	}
	return min(d, b.max())
}

// Reset starts the schedule over, after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// Wait sleeps d with the policy's Sleep.
func (b *Backoff) Wait(ctx context.Context, d time.Duration) error {
	if b.p.Sleep != nil {
		return b.p.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits for d or until ctx is done, whichever comes first, and
// returns ctx.Err() in the second case.
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

// RetryAfter reads a Retry-After header, in seconds or as an HTTP date;
// zero when absent or unreadable.
func RetryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
