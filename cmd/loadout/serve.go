package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"loadout/bridge"
	"loadout/tools"
)

// serve runs every enabled channel and the HTTP server until ctx is done,
// then lets in-flight turns finish for http.shutdown_grace.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.requireLLM(); err != nil {
		return err
	}
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.db.Close()
	chans, err := a.channels(ctx)
	if err != nil {
		return err
	}
	if len(chans) == 0 {
		log.Warn(msgNoChannels)
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen: %w", err)
	}
	return a.run(ctx, ln, chans)
}

// Limits of the HTTP server. Every handler answers quickly (a turn runs
// on the delivery pipeline, not in the request), so a request that is
// slow to arrive or large is cut off without tying anything up.
const (
	maxRequestBody    = 1 << 20 // webhooks and Slack events are far smaller
	maxHeaderBytes    = 64 << 10
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
)

// httpServer is the server for a.mux with its limits; every request body
// is capped at maxRequestBody, answered 413 beyond it.
func (a *app) httpServer() *http.Server {
	limits := a.limits
	if limits == nil {
		limits = &httpLimits{readHeader: readHeaderTimeout, read: readTimeout, write: writeTimeout, idle: idleTimeout, body: maxRequestBody}
	}
	return &http.Server{
		Handler:           http.MaxBytesHandler(a.mux, limits.body),
		ReadHeaderTimeout: limits.readHeader,
		ReadTimeout:       limits.read,
		WriteTimeout:      limits.write,
		IdleTimeout:       limits.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
}

// httpLimits overrides the server's limits (tests shorten them).
type httpLimits struct {
	readHeader, read, write, idle time.Duration
	body                          int64
}

// run serves HTTP on ln and runs the channels. If one part fails, the
// others are stopped and the first error is returned.
func (a *app) run(ctx context.Context, ln net.Listener, chans []bridge.Channel) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	a.chans = chans
	a.mu.Unlock()
	srv := a.httpServer()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.log.Info("http server listening", "addr", ln.Addr().String())
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("http server: %w", err))
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One process runs the scheduler when several share a database.
		a.exclusive.Do(ctx, "scheduler", a.scheduler.Run)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.runMCP(ctx)()
	}()
	for _, c := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.log.Info("channel started", "channel", c.Name())
			err := c.Run(ctx)
			if err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("%s: %w", c.Name(), err))
				return
			}
			a.log.Info("channel stopped", "channel", c.Name())
		}()
	}
	<-ctx.Done()
	a.log.Info("shutting down", "grace", a.cfg.grace())
	sctx, scancel := context.WithTimeout(context.Background(), a.cfg.grace())
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	wg.Wait()
	return firstErr
}

// printTools prints each group's tool count and schema tokens, the core
// tools, and the first-turn payload of both routing modes.
func printTools(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) error {
	a, err := buildApp(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.db.Close()
	r := toolReport(a.reg, a.tokens.Count)
	r.write(out)
	return nil
}

// report is what `loadout tools` prints.
type report struct {
	groups      []groupCost
	coreTools   []string
	coreTokens  int
	listing     int
	allTokens   int
	allTools    int
	groupsTotal int // core schemas + listing
}

type groupCost struct {
	name   string
	tools  int
	tokens int
}

func toolReport(reg *tools.Registry, count func(string) int) report {
	var r report
	schema := func(defs []tools.Definition) int { return tools.SchemaTokens(defs, count) }
	for _, g := range reg.Groups() {
		defs := reg.GroupTools(g.Name, nil)
		r.groups = append(r.groups, groupCost{g.Name, len(defs), schema(defs)})
	}
	core := reg.Core(nil)
	for _, d := range core {
		r.coreTools = append(r.coreTools, d.Name)
	}
	r.coreTokens = schema(core)
	r.listing = count(reg.Listing(nil))
	all := reg.All(nil)
	r.allTools, r.allTokens = len(all), schema(all)
	r.groupsTotal = r.coreTokens + r.listing
	return r
}

func (r report) write(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOOLS\tSCHEMA TOKENS\t")
	gs := append([]groupCost(nil), r.groups...)
	sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", g.name, g.tools, bridge.Thousands(g.tokens))
	}
	fmt.Fprintf(tw, "core (always sent)\t%d\t%s\t\n", len(r.coreTools), bridge.Thousands(r.coreTokens))
	fmt.Fprintf(tw, "group listing (system prompt)\t\t%s\t\n", bridge.Thousands(r.listing))
	tw.Flush()
	fmt.Fprintf(out, "\nCore tools: %s\n\n", strings.Join(r.coreTools, ", "))
	fmt.Fprintf(out, "First-turn tool payload:\n")
	fmt.Fprintf(out, "  routing: groups  %s tokens (core schemas %s + listing %s)\n",
		bridge.Thousands(r.groupsTotal), bridge.Thousands(r.coreTokens), bridge.Thousands(r.listing))
	fmt.Fprintf(out, "  routing: all     %s tokens (%d schemas)\n", bridge.Thousands(r.allTokens), r.allTools)
	if r.groupsTotal > 0 {
		fmt.Fprintf(out, "  ratio            all is %.1fx groups; groups sends %.1f%% of all\n",
			float64(r.allTokens)/float64(r.groupsTotal), 100*float64(r.groupsTotal)/float64(r.allTokens))
	}
	fmt.Fprintln(out, "Tokens are counted with o200k_base on each tool's JSON function schema.")
}
