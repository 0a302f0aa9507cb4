package chattest

import (
	"testing"
	"time"
)

// Eventually waits up to ten seconds for cond, checking every few
// milliseconds, and fails the test naming what it waited for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
