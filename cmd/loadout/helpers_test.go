package main

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// startRun runs a.run on ln with chans in the background. The returned
// stop (also run at cleanup) cancels it and fails the test if run returns
// an error or does not return within ten seconds.
func startRun(t *testing.T, a *app, ln net.Listener, chans []namedRunner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx, ln, chans) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run returned %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("run did not stop after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
