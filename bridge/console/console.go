// Package console is the terminal channel: a line-based REPL over the same
// router, engine and store as every other channel.
package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"loadout/bridge"
	"loadout/chat"
)

// Config configures a Console.
type Config struct {
	In  io.Reader
	Out io.Writer
	// User names the person; the chat key is "console:<User>". Default "local".
	User string
	// Prompt is printed before each line is read; default "you> ".
	Prompt string
	Logger *slog.Logger
}

// Console reads one message per line and prints each reply.
type Console struct {
	cfg    Config
	router *bridge.Router
}

// New returns a console over router.
func New(cfg Config, router *bridge.Router) *Console {
	if cfg.User == "" {
		cfg.User = "local"
	}
	if cfg.Prompt == "" {
		cfg.Prompt = "you> "
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Console{cfg: cfg, router: router}
}

// ChatKey is the console's session key.
func (c *Console) ChatKey() string { return "console:" + c.cfg.User }

// Run reads lines until end of input, /quit, or ctx is done. Errors
// handling a line are printed as a plain sentence and the loop goes on.
func (c *Console) Run(ctx context.Context) error {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(c.cfg.In)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	fmt.Fprintf(c.cfg.Out, "Type a message, /help for commands, /quit to leave.\n%s", c.cfg.Prompt)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.cfg.Out)
			return nil
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(c.cfg.Out)
				return nil
			}
			text := strings.TrimSpace(line)
			if text == "/quit" || text == "/exit" {
				return nil
			}
			if text != "" {
				c.handle(ctx, text)
			}
			fmt.Fprint(c.cfg.Out, c.cfg.Prompt)
		}
	}
}

func (c *Console) handle(ctx context.Context, text string) {
	in := chat.Inbound{ChatKey: c.ChatKey(), UserKey: c.ChatKey(), Text: text}
	reply, err := c.router.Handle(ctx, in)
	if err != nil {
		c.cfg.Logger.Error("console message failed", "err", err)
		reply = bridge.TextFailed
	}
	fmt.Fprintf(c.cfg.Out, "%s\n", strings.TrimRight(reply, "\n"))
}
