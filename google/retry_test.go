package google

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
)

func TestBackoffRetriesTemporaryErrors(t *testing.T) {
	b := Backoff{Attempts: 3, Initial: time.Millisecond}
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
			err := b.Do(context.Background(), func() error { n++; return tc.err })
			if !errors.Is(err, tc.err) || n != tc.calls {
				t.Fatalf("Do = %v after %d calls, want %v after %d", err, n, tc.err, tc.calls)
			}
		})
	}
}

func TestBackoffStopsOnSuccess(t *testing.T) {
	n := 0
	err := Backoff{Initial: time.Millisecond}.Do(context.Background(), func() error {
		n++
		if n < 2 {
			return &googleapi.Error{Code: 502}
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("Do = %v after %d calls, want nil after 2", err, n)
	}
}

func TestBackoffStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := Backoff{Attempts: 5, Initial: time.Hour, Max: time.Hour}.Do(ctx, func() error {
		n++
		cancel()
		return &googleapi.Error{Code: 500}
	})
	if err == nil || n != 1 {
		t.Fatalf("Do = %v after %d calls, want the 500 after 1", err, n)
	}
}
