package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"loadout/bridge"
	"loadout/httpd"
	"loadout/internal/release"
	"loadout/internal/startgc"
	"loadout/settings"
	"loadout/tools"

	"golang.org/x/sync/errgroup"
)

// serve runs every enabled channel and the HTTP server until ctx is done,
// then lets in-flight turns finish for http.shutdown_grace.
func serve(ctx context.Context, cfg settings.Config, log *slog.Logger) error {
	if err := cfg.RequireLLM(); err != nil {
		return err
	}
	// Start-up's allocations are nearly all garbage once it is over (see
	// settle): the collector waits for a larger heap until then, rather
	// than running again and again over what is about to be dropped.
	restore := startgc.Hold()
	defer restore()
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	a.started = restore
	defer a.db.Close()
	defer a.browser.Close() // the chats' browsers and profiles
	if cfg.UI.Enabled {
		if err := a.wireUI(); err != nil {
			return err
		}
	}
	chans, err := a.channels(ctx)
	if err != nil {
		return err
	}
	if len(chans) == 0 {
		log.Warn(settings.NoChannels())
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen: %w", err)
	}
	return a.run(ctx, ln, chans)
}

// run serves HTTP on ln and runs the channels, the scheduler and the MCP
// servers. If one part fails, the others are stopped and the first error
// is returned.
func (a *app) run(ctx context.Context, ln net.Listener, chans []bridge.Channel) error {
	g, ctx := errgroup.WithContext(ctx)
	srv := httpd.Server(a.mux, cmp.Or(a.limits, httpd.DefaultLimits), a.log)
	g.Go(func() error {
		a.log.Info("http server listening", "addr", ln.Addr().String())
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	// One process runs the scheduler when several share a database.
	g.Go(func() error {
		if err := a.exclusive.Do(ctx, "scheduler", a.scheduler.Run); ctx.Err() == nil {
			return err
		}
		return nil // only ctx ending
	})
	g.Go(func() error { a.runMCP(ctx)(); return nil })
	g.Go(func() error { return a.db.RunEmbeddingsAlone(ctx, a.exclusive) })
	for _, c := range chans {
		g.Go(func() error {
			a.log.Info("channel started", "channel", c.Name())
			if err := c.Run(ctx); err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: %w", c.Name(), err)
			}
			a.log.Info("channel stopped", "channel", c.Name())
			return nil
		})
	}
	go a.settle(ctx)
	<-ctx.Done()
	a.log.Info("shutting down", "grace", a.cfg.Grace())
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Grace())
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return g.Wait()
}

// settle ends start-up: the collector's setting goes back to what it
// was (a.started), and what start-up built and dropped (the config's
// parse, the schemas' reflection, the migration's SQL) once every
// channel is connected, or after settleWithin: one collection, and the
// free pages of the runtime and of the C allocator (SQLite's) returned
// to the system at once, rather than held by an idle process until the
// runtime's scavenger gets to them (and, for SQLite's, never). It then
// does the same after every burst of work, until ctx ends (package
// release).
func (a *app) settle(ctx context.Context) {
	if a.started != nil {
		defer a.started()
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(settleWithin)
	for len(a.hub.NotReady()) > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	if a.started != nil {
		a.started()
	}
	release.Watch(ctx, func() { a.db.GiveBack(ctx) }, a.metrics.Released)
}

// settleWithin bounds settle's wait for the channels to connect.
const settleWithin = 30 * time.Second

// printTools prints each group's tool count and schema tokens, the core
// tools, and the first-turn payload of both routing modes.
func printTools(ctx context.Context, cfg settings.Config, log *slog.Logger, out io.Writer) error {
	a, err := buildApp(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.db.Close()
	tools.Report(a.reg, a.tokens.Count).Write(out)
	return nil
}
