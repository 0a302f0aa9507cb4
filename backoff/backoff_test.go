package backoff

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if err := Sleep(ctx, 0); err != context.Canceled {
		t.Fatalf("Sleep(0) on a cancelled context = %v", err)
	}
}

var errBusy = errors.New("busy")

type limited struct{ after time.Duration }

func (limited) Error() string { return "rate limited" }

func classify(err error) (bool, time.Duration) {
	var l limited
	if errors.As(err, &l) {
		return true, l.after
	}
	return errors.Is(err, errBusy), 0
}

func TestDoWaitsExponentiallyAndHonoursServerWaits(t *testing.T) {
	var waits []time.Duration
	p := Policy{Attempts: 6, Initial: time.Millisecond, Max: 5 * time.Millisecond,
		Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	errs := []error{errBusy, limited{7 * time.Second}, errBusy, errBusy, errBusy, errBusy}
	n := 0
	err := p.Do(context.Background(), classify, func(context.Context) error { n++; return errs[n-1] })
	if !errors.Is(err, errBusy) || n != 6 {
		t.Fatalf("Do = %v after %d calls", err, n)
	}
	// The server's wait is capped at Max and does not advance the schedule.
	want := []time.Duration{time.Millisecond, 5 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits = %v, want %v", waits, want)
	}
}

func TestDoStopsOnFinalErrorSuccessAndContext(t *testing.T) {
	p := Policy{Initial: time.Millisecond}
	n := 0
	final := errors.New("final")
	if err := p.Do(context.Background(), classify, func(context.Context) error { n++; return final }); err != final || n != 1 {
		t.Fatalf("final error: %v after %d calls", err, n)
	}
	n = 0
	if err := p.Do(context.Background(), classify, func(context.Context) error {
		n++
		if n < 3 {
			return errBusy
		}
		return nil
	}); err != nil || n != 3 {
		t.Fatalf("success: %v after %d calls", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	err := Policy{Initial: time.Hour}.Do(ctx, Always, func(context.Context) error { n++; cancel(); return errBusy })
	if err != errBusy || n != 1 {
		t.Fatalf("cancelled: %v after %d calls", err, n)
	}
}

func TestJitterStaysWithinBounds(t *testing.T) {
	b := Policy{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: 0.25}.New()
	for i, base := range []time.Duration{100, 200, 400, 800, 1000} {
		d := b.Next()
		lo := base * time.Millisecond
		if d < lo || d > min(lo+lo/4, time.Second) {
			t.Fatalf("wait %d = %s, want within [%s, %s]", i, d, lo, lo+lo/4)
		}
	}
	b.Reset()
	if d := b.Next(); d < 100*time.Millisecond || d > 125*time.Millisecond {
		t.Fatalf("after Reset the wait is %s", d)
	}
}

func TestRetryAfter(t *testing.T) {
	h := http.Header{}
	if RetryAfter(h) != 0 {
		t.Fatal("no header, non-zero wait")
	}
	h.Set("Retry-After", "7")
	if RetryAfter(h) != 7*time.Second {
		t.Fatalf("seconds: %s", RetryAfter(h))
	}
	h.Set("Retry-After", time.Now().Add(time.Minute).UTC().Format(http.TimeFormat))
	if d := RetryAfter(h); d < 50*time.Second || d > time.Minute {
		t.Fatalf("date: %s", d)
	}
	h.Set("Retry-After", "soon")
	if RetryAfter(h) != 0 {
		t.Fatal("garbage gave a wait")
	}
}
