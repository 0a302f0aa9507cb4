package google

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	"loadout/backoff"
)

func TestRetryRetriesTemporaryErrors(t *testing.T) {
	p := backoff.Policy{Attempts: 3, Initial: time.Millisecond}
	for _, tc := range []struct {
		name  string
		err   error
		calls int
	}{
		{"500", &googleapi.Error{Code: 500}, 3},
		{"503", &googleapi.Error{Code: http.StatusServiceUnavailable}, 3},
		{"429", &googleapi.Error{Code: http.StatusTooManyRequests}, 3},
		{"403 rate limit", &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "userRateLimitExceeded"}}}, 3},
		{"403", &googleapi.Error{Code: 403}, 1},
		{"404", &googleapi.Error{Code: 404}, 1},
		{"plain", errors.New("boom"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := Retry(context.Background(), p, func() error { n++; return tc.err })
			if !errors.Is(err, tc.err) || n != tc.calls {
				t.Fatalf("Retry = %v after %d calls, want %v after %d", err, n, tc.err, tc.calls)
			}
		})
	}
}

func TestRetryStopsOnSuccess(t *testing.T) {
	n := 0
	err := Retry(context.Background(), backoff.Policy{Initial: time.Millisecond}, func() error {
		n++
		if n < 2 {
			return &googleapi.Error{Code: 502}
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("Retry = %v after %d calls, want nil after 2", err, n)
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := Retry(ctx, backoff.Policy{Attempts: 5, Initial: time.Hour, Max: time.Hour}, func() error {
		n++
		cancel()
		return &googleapi.Error{Code: 500}
	})
	if err == nil || n != 1 {
		t.Fatalf("Retry = %v after %d calls, want the 500 after 1", err, n)
	}
}

func TestRetryHonoursRetryAfterAndDefaults(t *testing.T) {
	var waits []time.Duration
	p := backoff.Policy{Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	n := 0
	err := Retry(context.Background(), p, func() error {
		n++
		if n == 1 {
			return &googleapi.Error{Code: 429, Header: http.Header{"Retry-After": {"4"}}}
		}
		return &googleapi.Error{Code: 503, Header: http.Header{"Retry-After": {"60"}}}
	})
	if err == nil || n != 3 {
		t.Fatalf("Retry = %v after %d calls, want an error after the default 3", err, n)
	}
	// The server's 4s, then its 60s capped at the default 5s.
	if len(waits) != 2 || waits[0] != 4*time.Second || waits[1] != 5*time.Second {
		t.Fatalf("waits = %v, want [4s 5s]", waits)
	}
}
