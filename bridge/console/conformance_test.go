package console_test

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/console"
)

// The console passes the channel conformance suite: its one chat, lines
// in through a pipe, answers read from what it prints.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

type conformance struct {
	mu    sync.Mutex
	owner *testing.T
	out   *transcript
	in    *io.PipeWriter
}

// transcript is everything the consoles of a test printed.
type transcript struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *transcript) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *transcript) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

const prompt = "you> "

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 1, Stream: true, FilesOut: true}
}

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	c.mu.Lock()
	if c.owner != t {
		c.owner, c.out = t, &transcript{}
	}
	r, w := io.Pipe()
	c.in = w
	c.mu.Unlock()
	con := console.New(console.Config{In: r, Out: c.out, User: "ana", Prompt: prompt, Stream: b.Stream, Delivery: b.Delivery},
		bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- con.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			w.Close()
			select {
			case <-done:
			case <-time.After(bridgetest.Wait):
				t.Error("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return con, stop
}

func (c *conformance) ChatKey(int) string { return "console:ana" }

// Send types a line; it returns once the console has read it.
func (c *conformance) Send(t *testing.T, _ int, text string) string {
	c.mu.Lock()
	w := c.in
	c.mu.Unlock()
	if _, err := io.WriteString(w, text+"\n"); err != nil {
		t.Fatal(err)
	}
	return text
}

func (c *conformance) Redeliver(t *testing.T, _ int, _ string) {
	t.Fatal("the console has nothing to redeliver")
}

func (c *conformance) SendFile(t *testing.T, _ int, _ string, _ []byte, _ string) string {
	t.Fatal("the console takes no files but audio")
	return ""
}

// greeting is the console's first line.
const greeting = "Type a message, /help for commands, /quit to leave."

// Answers are the lines the console printed, less its prompts and
// greeting.
func (c *conformance) Answers(int) []string {
	var out []string
	for _, line := range strings.Split(c.out.String(), "\n") {
		for strings.HasPrefix(line, prompt) {
			line = strings.TrimPrefix(line, prompt)
		}
		if line = strings.TrimSpace(line); line != "" && line != greeting {
			out = append(out, line)
		}
	}
	return out
}

var fileLine = regexp.MustCompile(`\[file ([^:\]]+): ([^\]]+)\]`)

// Uploads are the files the console showed, read from where it said.
func (c *conformance) Uploads(int) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range fileLine.FindAllStringSubmatch(c.out.String(), -1) {
		b, _ := os.ReadFile(m[2])
		out[m[1]] = b
	}
	return out
}

// Approve answers the question's prompt line with "y".
func (c *conformance) Approve(t *testing.T, i int) { c.Send(t, i, "y") }

func (c *conformance) Hold(int)  {}
func (c *conformance) Release()  {}
func (c *conformance) Held() int { return 0 }

// What the console can do besides the contract.
var (
	_ bridge.FileSender = (*console.Console)(nil)
	_ bridge.Asker      = (*console.Console)(nil)
	_ bridge.Drafter    = (*console.Console)(nil)
	_ bridge.Speaker    = (*console.Console)(nil)
)
