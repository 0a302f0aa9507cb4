package google

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/api/googleapi"
)

// Backoff says how often and how long to retry a Google call that failed
// with a temporary error (429, 5xx, or 403 for a rate limit). Its zero
// value retries three times in all, waiting 500ms, then 1s, never more than
// 5s per wait.
type Backoff struct {
	// Attempts is the total number of tries; zero means 3.
	Attempts int
	// Initial is the wait before the second try, doubled for each further
	// try and jittered by up to a quarter; zero means 500ms.
	Initial time.Duration
	// Max caps one wait, including one asked for by a Retry-After header;
	// zero means 5s.
	Max time.Duration
}

// Do calls fn until it returns nil or an error that is not Temporary, the
// attempts are used up, or ctx ends. It returns fn's last error (nil on
// success), so a caller maps it with MapError as usual. fn must build its
// request afresh on each call.
func (b Backoff) Do(ctx context.Context, fn func() error) error {
	attempts, wait, limit := b.Attempts, b.Initial, b.Max
	if attempts <= 0 {
		attempts = 3
	}
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	if limit <= 0 {
		limit = 5 * time.Second
	}
	var err error
	for i := 0; i < attempts; i++ {
		if err = fn(); err == nil || !Temporary(err) || i == attempts-1 {
			return err
		}
		d := wait + rand.N(wait/4+1)
		if ra := retryAfter(err); ra > d {
			d = ra
		}
		d = min(d, limit)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
	return err
}

// Retry calls fn with the zero Backoff; see Backoff.Do.
func Retry(ctx context.Context, fn func() error) error { return Backoff{}.Do(ctx, fn) }

// Temporary reports whether err is a Google API error worth retrying: 429,
// any 5xx, or a 403 whose reason is a rate limit.
func Temporary(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return false
	}
	return ge.Code == http.StatusTooManyRequests || ge.Code >= 500 ||
		(ge.Code == http.StatusForbidden && isRateLimit(ge))
}

// retryAfter reads a Retry-After header given in seconds; zero if absent.
func retryAfter(err error) time.Duration {
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Header == nil {
		return 0
	}
	s, perr := strconv.Atoi(ge.Header.Get("Retry-After"))
	if perr != nil || s <= 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}
