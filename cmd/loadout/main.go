// Command loadout is a self-hosted AI assistant for Telegram, Slack and the
// terminal that loads tool groups only when a conversation needs them.
//
// Usage:
//
//	loadout [-config FILE] serve            run every enabled channel and the HTTP server
//	loadout [-config FILE] chat             talk to the assistant in this terminal
//	loadout [-config FILE] tools            print the tool groups and their token costs
//	loadout [-config FILE] google login -user KEY   connect a Google account from a terminal
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

const usage = `loadout — a self-hosted assistant that loads tool groups on demand

Usage:
  loadout [-config FILE] serve                   run the enabled channels and the HTTP server
  loadout [-config FILE] chat                    chat in this terminal
  loadout [-config FILE] tools                   print tool groups and schema token costs
  loadout [-config FILE] google login -user KEY  connect a Google account for a chat user

The config file is -config, else $LOADOUT_CONFIG, else ./config.yaml.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadout:", err)
		}
		os.Exit(1)
	}
}

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("loadout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	configFlag := fs.String("config", "", "config file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	path := configPath(*configFlag, getenv)
	cfg, err := loadConfig(path, getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "serve":
		return serve(ctx, cfg, log)
	case "chat":
		if cfg.Log.Level == "info" { // keep the conversation readable
			log = newLogger(LogConfig{Level: "warn", Format: cfg.Log.Format}, stderr)
		}
		return chatREPL(ctx, cfg, log, stdin, stdout)
	case "tools":
		return printTools(ctx, cfg, log, stdout)
	case "google":
		return googleCommand(ctx, cfg, log, rest, stdout)
	case "help":
		fs.Usage()
		return nil
	}
	fs.Usage()
	return fmt.Errorf("unknown command %q", cmd)
}

func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by loadConfig
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
