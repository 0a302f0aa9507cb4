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
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
)

func TestConsoleREPL(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
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
	env := storetest.NewEnv(t, storetest.Options{})
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

// TEST: in the console a call that needs approval asks "Approve #code? [y/n]";
// "n" denies it, and after a second request "y" runs it once with the
// stored arguments.
func TestConsoleApprovesWithYesOrNo(t *testing.T) {
	var sent []string
	var mu sync.Mutex
	env := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "mail_send", Description: "Send mail", Effect: tools.EffectDestructive},
			func(ctx context.Context, in struct {
				To string `json:"to" reach:"recipients"`
			}) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, in.To)
				return "sent", nil
			}))
	}})
	env.Model.Call("mail_send", `{"to":"ana@example.com"}`)
	env.Model.Text("Fine, not sent.")
	env.Model.Call("mail_send", `{"to":"bob@example.com"}`)
	env.Model.Text("Sent to Bob.")
	var out bytes.Buffer
	c := console.New(console.Config{
		In:   strings.NewReader("mail Ana\n/status\nn\nmail Bob\ny\ny\n"),
		Out:  &out,
		User: "ana",
	}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"Run mail_send with to 'ana@example.com'\n", "? [y/n] (or /approve #", "Fine, not sent.", "Sent to Bob.",
		"Waiting for your approval (until "} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || sent[0] != "bob@example.com" {
		t.Fatalf("sent = %v", sent)
	}
}

// Past limits.daily_tokens_per_person the console prints the cap's
// sentence and the model is not asked; /status shows what is left.
func TestConsoleShowsTheSpendCap(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{Config: chat.Config{Limits: chat.Limits{DailyTokensPerPerson: 15}}})
	env.Model.Text("Hello from the model.")
	var out bytes.Buffer
	c := console.New(console.Config{
		In:   strings.NewReader("hi there\nand more\n/status\n/quit\n"),
		Out:  &out,
		User: "ana",
	}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Hello from the model.",
		"Sorry, you have used up today's allowance of 15 tokens (limits.daily_tokens_per_person), so I can't pass this message on to the model. It starts again at 00:00 UTC, in ",
		"You have 0 of 15 tokens left today (limits.daily_tokens_per_person; resets in ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := len(env.Model.Requests()); n != 1 {
		t.Errorf("model calls = %d, want 1", n)
	}
}

// With llm.prices, /status shows what the person and the chat spent
// today, and a cap in money what is left of it.
func TestConsoleStatusShowsTodaysCost(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{Config: chat.Config{
		Limits: chat.Limits{DailyCostPerPerson: 1},
		Prices: map[string]chat.Price{"m": {Input: 10_000, Output: 20_000}},
	}})
	env.Model.Text("Hello from the model.") // 10 prompt, 5 completion: 0.10 + 0.10
	var out bytes.Buffer
	c := console.New(console.Config{In: strings.NewReader("hi\n/status\n/quit\n"), Out: &out, User: "ana"},
		bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Spent today: 0.20 by you, 0.20 in this chat (at llm.prices)",
		"You have 0.80 of 1.00 left today (limits.daily_cost_per_person; resets in ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
