package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/settings"
)

// startRun runs a.run on ln with chans in the background. The returned
// stop (also run at cleanup) cancels it and fails the test if run returns
// an error or does not return within ten seconds.
func startRun(t *testing.T, a *app, ln net.Listener, chans []bridge.Channel) (stop func()) {
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

// bareApp builds an app on the defaults with a store in a temp dir and no
// channels, and a listener for its HTTP server; both are closed at the end
// of the test.
func bareApp(t *testing.T) (*app, net.Listener) {
	t.Helper()
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.HTTP.ShutdownGrace = settings.Duration(5 * time.Second)
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return a, ln
}

// env is a getenv of m.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
