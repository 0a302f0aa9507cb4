// Command loadout is a self-hosted AI assistant for chat apps and the
// terminal that loads tool groups only when a conversation needs them.
//
// Usage:
//
//	loadout serve [-config FILE]                    run every enabled channel and the HTTP server
//	loadout chat [-config FILE]                     talk to the assistant in this terminal
//	loadout tools [-config FILE]                    print the tool groups and their token costs
//	loadout google login -user KEY [-config FILE]   connect a Google account from a terminal
//	loadout help [command]                          print the usage
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"loadout/bridge/console"
	"loadout/httpd"
	"loadout/internal/startgc"
	"loadout/proc"
	"loadout/settings"
	"loadout/store"
	"loadout/tools/pdf"
	"loadout/tools/shell"
	"loadout/worker"
)

const usage = `loadout — a self-hosted assistant that loads tool groups on demand

Usage:
  loadout [-config FILE] <command> [flags]

Commands:
  serve                   run the enabled channels and the HTTP server
  chat                    chat in this terminal
  tools                   print tool groups and schema token costs
  google login -user KEY  connect a Google account for a chat user
  mcp login SERVER        sign in to an MCP server with auth: operator, for everyone
  health [-url URL]       check that a running serve answers (for container health checks)
  help [command]          print this help, or a command's

Every command takes -config FILE, before or after its name. The config
file is -config, else $LOADOUT_CONFIG, else ./config.yaml.
`

// command is one subcommand of the CLI.
type command struct {
	name    string // as typed: "serve", "google login"
	summary string
	// flags adds the command's own flags (besides -config).
	flags func(fs *flag.FlagSet)
	// arg, when set, names the one argument the command takes after its
	// flags ("server"); cli.arg holds it.
	arg string
	run func(ctx context.Context, c *cli) error
}

// cli is what a command runs with once its flags are parsed and its
// config loaded.
type cli struct {
	cfg    settings.Config
	log    *slog.Logger
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	user   string // google login -user
	arg    string // the command's one argument (command.arg)
	// configPath is the config file in use, "" for none.
	configPath string
}

func commands() []command {
	var user, healthURL string
	return []command{
		{name: "serve", summary: "Run every enabled channel (" + settings.ChannelKinds().Names("", "and") + ") and the HTTP server until interrupted.",
			run: func(ctx context.Context, c *cli) error { return serve(ctx, c.cfg, c.log) }},
		{name: "chat", summary: "Talk to the assistant in this terminal; /help lists the commands, /quit ends.",
			run: chatREPL},
		{name: "tools", summary: "Print the tool groups and what their schemas cost in tokens.",
			run: func(ctx context.Context, c *cli) error { return printTools(ctx, c.cfg, c.log, c.stdout) }},
		{name: "google login", summary: "Connect a Google account for a chat user, from this terminal.",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&user, "user", "", "chat user to connect, as channel:id, e.g. console:local ("+settings.ChannelKinds().ExampleUser()+")")
			},
			run: func(ctx context.Context, c *cli) error { return googleLogin(ctx, c.cfg, c.log, user, c.stdout) }},
		{name: "mcp login", arg: "server", summary: "Sign in to an MCP server with auth: operator, for everyone, from this terminal.",
			run: func(ctx context.Context, c *cli) error { return mcpLogin(ctx, c.cfg, c.log, c.arg, c.stdout) }},
		{name: "health", summary: "Check that the server of this config (http.listen) answers /healthz; exit status 0 when it does.",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&healthURL, "url", "", "URL to check instead of http://<http.listen>/healthz")
			},
			run: func(ctx context.Context, c *cli) error {
				return httpd.Check(ctx, c.cfg.HTTP.Listen, healthURL, c.stdout)
			}},
	}
}

// errUsage marks a command line that could not be understood; main exits
// with status 2 for it.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func main() {
	// Start-up held the collector back (startgc): serve lets it go once its
	// channels are connected, any other process (a worker's too) now.
	if !serving(os.Args[1:]) {
		startgc.Done()
	}
	// Processes loadout starts of itself take up their work here: a
	// worker parses the untrusted file it was started for, a keeper runs
	// an MCP server or a command, the confined child of exec becomes its
	// command.
	worker.Serve(map[string]worker.Func{pdf.Job: pdf.Work})
	proc.Serve()
	shell.RunChild()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	ctx, stopInterrupts := console.WithInterrupts(ctx)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil // a stop during the start, as one after it, is a clean exit
	}
	stopInterrupts()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadout:", err)
		if errors.As(err, new(errUsage)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run is main without the process: tests call it. Help goes to stdout and
// needs no config file; a command line that cannot be understood is an
// errUsage, with the usage on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	global := flag.NewFlagSet("loadout", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	configFlag := global.String("config", "", "config file")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		fmt.Fprint(stderr, usage)
		return errUsage{err.Error()}
	}
	rest := global.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage{"no command given"}
	}
	if rest[0] == "help" {
		return help(rest[1:], stdout, stderr)
	}
	cmd, rest, ok := findCommand(rest)
	if !ok {
		fmt.Fprint(stderr, usage)
		return errUsage{fmt.Sprintf("unknown command %q", strings.Join(rest, " "))}
	}
	flags := commandFlags(cmd, configFlag)
	if err := flags.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(cmd, stdout)
			return nil
		}
		commandUsage(cmd, stderr)
		return errUsage{fmt.Sprintf("%s: %v", cmd.name, err)}
	}
	var arg string
	switch {
	case cmd.arg != "" && flags.NArg() != 1:
		commandUsage(cmd, stderr)
		return errUsage{fmt.Sprintf("%s: give the %s, e.g. loadout %s NAME", cmd.name, cmd.arg, cmd.name)}
	case cmd.arg != "":
		arg = flags.Arg(0)
	case flags.NArg() > 0:
		commandUsage(cmd, stderr)
		return errUsage{fmt.Sprintf("%s: unexpected argument %q", cmd.name, flags.Arg(0))}
	}
	if !store.Available {
		return store.ErrNoSQLite
	}
	path := settings.Path(*configFlag, getenv)
	cfg, err := settings.Load(path, getenv)
	if errors.Is(err, fs.ErrNotExist) && *configFlag == "" && getenv("LOADOUT_CONFIG") == "" {
		// No file named anywhere and none here: defaults and LOADOUT_*
		// variables, as a container runs.
		path = ""
		cfg, err = settings.Parse(nil, getenv)
	}
	if err != nil {
		return err
	}
	c := &cli{cfg: cfg, log: cfg.Logger(stderr), stdin: stdin, stdout: stdout, stderr: stderr, configPath: path, arg: arg}
	if cmd.name == "serve" {
		c.log.Info("loadout starting", cfg.Startup(cmd.name, path)...)
	}
	return cmd.run(ctx, c)
}

// serving reports whether args run serve (-config before or after it).
func serving(args []string) bool {
	global := flag.NewFlagSet("loadout", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.String("config", "", "")
	err := global.Parse(args)
	cmd, _, ok := findCommand(global.Args())
	return err == nil && ok && cmd.name == "serve"
}

// findCommand matches the longest command name at the start of args and
// returns the arguments after it.
func findCommand(args []string) (command, []string, bool) {
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c, args[len(words):], true
		}
	}
	return command{}, args, false
}

// commandFlags is the flag set of cmd: its own flags and -config, which
// writes to the same place as the global one.
func commandFlags(cmd command, config *string) *flag.FlagSet {
	fs := flag.NewFlagSet("loadout "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(config, "config", *config, "config file (default $LOADOUT_CONFIG, else ./config.yaml)")
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	return fs
}

func commandUsage(cmd command, w io.Writer) {
	arg := ""
	if cmd.arg != "" {
		arg = " " + strings.ToUpper(cmd.arg)
	}
	fmt.Fprintf(w, "Usage: loadout %s [flags]%s\n\n%s\n\nFlags:\n", cmd.name, arg, cmd.summary)
	var config string
	fs := commandFlags(cmd, &config)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// help prints the usage, or one command's.
func help(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd, rest, ok := findCommand(args)
	if !ok || len(rest) > 0 {
		fmt.Fprint(stderr, usage)
		return errUsage{fmt.Sprintf("help: unknown command %q", strings.Join(args, " "))}
	}
	commandUsage(cmd, stdout)
	return nil
}
