package main

import (
	"context"
	"fmt"
	"path/filepath"

	"loadout/bridge/console"
	"loadout/logs"
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
	if err := cfg.RequireLLM(); err != nil {
		return err
	}
	log := c.log
	if cfg.Log.Level == "info" {
		quiet := cfg
		quiet.Log.Level = "warn"
		log = quiet.Logger(c.stderr)
	}
	startup := c.log
	cc := console.Config{In: c.stdin, Out: c.stdout, User: cfg.Console.User, Stream: cfg.Console.Stream}
	if dir := cfg.Store.Dir(); dir != "" && console.Interactive(c.stdin, c.stdout) {
		cc.HistoryFile = filepath.Join(dir, consoleHistoryFile)
		if console.SameTerminal(c.stderr, c.stdout) {
			path := filepath.Join(dir, consoleLogFile)
			f, err := logs.OpenFile(path)
			if err != nil {
				return err
			}
			defer f.Close()
			log = cfg.Logger(f)
			startup = log
			fmt.Fprintf(c.stdout, "Log lines go to %s.\n", path)
		}
	}
	startup.Info("loadout starting", cfg.Startup("chat", c.configPath)...)
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.db.Close()
	defer a.browser.Close() // the chats' browsers and profiles
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
