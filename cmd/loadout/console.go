package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/term"

	"loadout/bridge/console"
)

// Files `loadout chat` keeps beside the store when it runs at a terminal.
const (
	consoleHistoryFile = "console_history"
	consoleLogFile     = "console.log"
)

// chatREPL runs the console channel. At a terminal (console.Interactive)
// the typed lines are kept in console_history beside the store, and when
// stderr is that same terminal the log, startup line included, goes to
// console.log beside the store at log.level instead of between the lines
// of the conversation. Elsewhere the startup line goes to stderr and,
// at the default level info, only warnings and errors follow it, so the
// conversation stays readable.
func chatREPL(ctx context.Context, c *cli) error {
	cfg := c.cfg
	if err := cfg.requireLLM(); err != nil {
		return err
	}
	log := c.log
	if cfg.Log.Level == "info" {
		quiet := cfg
		quiet.Log.Level = "warn"
		log = newLogger(quiet, c.stderr)
	}
	startup := c.log
	cc := console.Config{In: c.stdin, Out: c.stdout, User: cfg.Console.User, Stream: cfg.Console.Stream}
	if dir := storeDir(cfg.Store.Path); dir != "" && console.Interactive(c.stdin, c.stdout) {
		cc.HistoryFile = filepath.Join(dir, consoleHistoryFile)
		if sameTerminal(c.stderr, c.stdout) {
			path := filepath.Join(dir, consoleLogFile)
			f, err := openLog(path)
			if err != nil {
				return err
			}
			defer f.Close()
			log = newLogger(cfg, f)
			startup = log
			fmt.Fprintf(c.stdout, "Log lines go to %s.\n", path)
		}
	}
	logStartup(startup, "chat", c.configPath, cfg)
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.db.Close()
	if cc.Delivery, err = a.delivery("console"); err != nil {
		return err
	}
	con := console.New(cc, a.router, a.db)
	a.hub.Add(con, nil)
	// Tasks are run while the console is: their answers are printed.
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.scheduler.Run(sctx) }()
	defer a.runMCP(sctx)()
	defer func() { stop(); <-done }()
	if console.Interactive(c.stdin, c.stdout) {
		// Ctrl-C during a message stops it; a second one, or one with
		// no message under way, leaves.
		defer console.OnInterrupt(ctx, con.Interrupt)()
	}
	return con.Run(ctx)
}

// storeDir is the directory of the store file, "" for an in-memory store.
func storeDir(path string) string {
	if path == "" || path == ":memory:" {
		return ""
	}
	return filepath.Dir(path)
}

// openLog opens path for appending, creating it and its directory
// (readable by the owner only, like the store).
func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("console log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("console log: %w", err)
	}
	return f, nil
}

// sameTerminal reports whether a and b are the same terminal.
func sameTerminal(a, b io.Writer) bool {
	fa, ok := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok || !ok2 || !term.IsTerminal(int(fa.Fd())) {
		return false
	}
	sa, err := fa.Stat()
	sb, err2 := fb.Stat()
	return err == nil && err2 == nil && os.SameFile(sa, sb)
}
