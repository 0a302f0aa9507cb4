package google

import (
	"context"
	"errors"
	"net/http"
	"time"

	"google.golang.org/api/googleapi"

	"loadout/backoff"
)

// Retry calls fn until it returns nil or an error that is not Temporary,
// the attempts are used up, or ctx ends, waiting by the shared backoff and
// honouring a Retry-After header. Zero fields of p take Google's defaults:
// three tries in all, waiting 500ms then 1s (jittered by up to a quarter),
// never more than 5s per wait. It returns fn's last error (nil on
// success), so a caller maps it with MapError as usual. fn must build its
// request afresh on each call.
func Retry(ctx context.Context, p backoff.Policy, fn func() error) error {
	if p.Attempts <= 0 {
		p.Attempts = 3
	}
	if p.Initial <= 0 {
		p.Initial = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 5 * time.Second
	}
	if p.Jitter == 0 {
		p.Jitter = 0.25
	}
	return p.Do(ctx, classify, func(context.Context) error { return fn() })
}

// classify is the backoff.Classify for Google API errors.
func classify(err error) (bool, time.Duration) {
	if !Temporary(err) {
		return false, 0
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Header != nil {
		return true, backoff.RetryAfter(ge.Header)
	}
	return true, 0
}

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
