package bridge

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// A download is held to its limit whatever size the platform stated.
func TestCappedStopsPastTheLimit(t *testing.T) {
	got, err := io.ReadAll(Capped(strings.NewReader("0123456789"), 10))
	if err != nil || string(got) != "0123456789" {
		t.Fatalf("at the limit: %q, %v", got, err)
	}
	got, err = io.ReadAll(Capped(strings.NewReader("0123456789"), 4))
	if !errors.Is(err, ErrTooLarge) || len(got) > 5 {
		t.Fatalf("past the limit: %d bytes, %v", len(got), err)
	}
}

func TestMinutes(t *testing.T) {
	for s, want := range map[int]string{45: "45 seconds", 60: "1 minute", 600: "10 minutes", 725: "12:05 minutes"} {
		if got := minutes(s); got != want {
			t.Errorf("minutes(%d) = %q, want %q", s, got, want)
		}
	}
}
