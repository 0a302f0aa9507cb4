// Package console is the terminal channel: a line-based REPL over the same
// router, engine, store and delivery pipeline as every other channel. A
// line is stored before it is handled, so one typed just before a crash is
// answered at the next start.
package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// Observer is told about turns and sends, for metrics; optional.
	Observer bridge.Observer
}

// Console reads one message per line and prints each reply.
type Console struct {
	cfg  Config
	pipe *bridge.Pipeline
	mu   sync.Mutex // guards writes to Out
	seq  int
}

// New returns a console over router that keeps its lines in inbox.
func New(cfg Config, router *bridge.Router, inbox bridge.Inbox) *Console {
	if cfg.User == "" {
		cfg.User = "local"
	}
	if cfg.Prompt == "" {
		cfg.Prompt = "you> "
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Console{cfg: cfg}
	c.pipe = bridge.NewPipeline(bridge.PipelineConfig{
		Channel: "console", Inbox: inbox, Handler: router, Outlet: c, Workers: 1, Logger: cfg.Logger, Observer: cfg.Observer,
	})
	return c
}

// ChatKey is the console's session key.
func (c *Console) ChatKey() string { return "console:" + c.cfg.User }

// Split keeps an answer whole: a terminal has no size limit.
func (c *Console) Split(text string) []string { return []string{text} }

// Send prints one answer.
func (c *Console) Send(_ context.Context, _ []byte, part string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := fmt.Fprintf(c.cfg.Out, "%s\n", strings.TrimRight(part, "\n"))
	return err
}

// Run answers lines left unanswered by an earlier run, then reads lines
// until end of input, /quit, or ctx is done. A line that fails is
// answered with a plain sentence and the loop goes on.
func (c *Console) Run(ctx context.Context) error {
	defer c.pipe.Stop()
	if err := c.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
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
	c.print("Type a message, /help for commands, /quit to leave.\n" + c.cfg.Prompt)
	for {
		select {
		case <-ctx.Done():
			c.print("\n")
			return nil
		case line, ok := <-lines:
			if !ok {
				c.print("\n")
				return nil
			}
			text := strings.TrimSpace(line)
			if text == "/quit" || text == "/exit" {
				return nil
			}
			if text != "" {
				c.handle(ctx, text)
			}
			c.print(c.cfg.Prompt)
		}
	}
}

func (c *Console) print(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprint(c.cfg.Out, s)
}

// handle delivers one line and waits for its answer to be printed.
func (c *Console) handle(ctx context.Context, text string) {
	c.seq++
	id := "line:" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(c.seq)
	err := c.pipe.Deliver(ctx, bridge.Pending{
		ID:      id,
		Inbound: chat.Inbound{ChatKey: c.ChatKey(), UserKey: c.ChatKey(), Text: text},
		Route:   []byte(c.ChatKey()),
	})
	switch {
	case err == nil, ctx.Err() != nil:
	case errors.Is(err, bridge.ErrNotStored):
		c.cfg.Logger.Error("console message not stored", "err", err)
		c.Send(ctx, nil, bridge.TextNotSaved)
	default:
		// The pipeline has told the person what happened.
		c.cfg.Logger.Debug("console message not answered", "err", err)
	}
}
