package console_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/console"
	"loadout/chat/chattest"
)

func TestConsoleREPL(t *testing.T) {
	env := chattest.NewEnv(t, chattest.Options{})
	env.Model.Text("Hello from the model.")
	var out bytes.Buffer
	c := console.New(console.Config{
		In:   strings.NewReader("hi there\n\n/status\n/help\n/quit\nnot read\n"),
		Out:  &out,
		User: "ana",
	}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"Hello from the model.", "Messages: 2", "you> ", "/quit — leave the console"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := len(env.Model.Requests()); n != 1 {
		t.Errorf("model calls = %d, want 1 (blank line, /status, /help and /quit are not messages)", n)
	}
	if c.ChatKey() != "console:ana" {
		t.Errorf("chat key = %s", c.ChatKey())
	}
	sess, _ := env.Store.OpenSession(context.Background(), "console:ana")
	if sess.Messages != 2 {
		t.Errorf("persisted %d messages under console:ana", sess.Messages)
	}
}

// writes records each write to the console's output.
type writes struct {
	mu  sync.Mutex
	all []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, string(p))
	return len(p), nil
}

// With console.stream the answer is printed as it arrives, piece by
// piece, and ends with its line break; it is printed once.
func TestConsoleStreamsTheAnswer(t *testing.T) {
	env := chattest.NewEnv(t, chattest.Options{})
	env.Model.Push(chattest.Step{Chunks: []string{"Hello ", "streamed ", "world."}, ChunkDelay: 80 * time.Millisecond})
	out := &writes{}
	c := console.New(console.Config{In: strings.NewReader("hi\n/quit\n"), Out: out, User: "ana", Stream: true},
		bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(out.all, "")
	if strings.Count(all, "Hello streamed world.") != 1 || !strings.Contains(all, "Hello streamed world.\n") {
		t.Fatalf("printed %q", all)
	}
	pieces := 0
	for _, w := range out.all {
		if strings.Contains("Hello streamed world.", w) && w != "" {
			pieces++
		}
	}
	if pieces < 2 {
		t.Errorf("the answer came in %d writes %q, want it printed as it arrived", pieces, out.all)
	}
}
