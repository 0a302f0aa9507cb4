// Package bridgetest is the channel conformance suite: one Run that every
// channel passes against its platform's fake, so what the channel
// contract promises (bridge.Channel) is checked the same way everywhere.
// A channel's own tests keep only what is specific to its platform.
package bridgetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
	"loadout/tools/files"
)

// Caps are what a channel's platform can do; the suite skips the rest.
type Caps struct {
	// Chats is how many chats a test can use at once (the console has
	// one).
	Chats int
	// Redeliver: the platform delivers an event again when its
	// acknowledgement was lost.
	Redeliver bool
	// Hold: the harness can hold the bot's messages on their way, to stop
	// the process in the middle of sending.
	Hold bool
	// Buttons: a question is answered by pressing Approve.
	Buttons bool
	// Stream: an answer can be shown while it is written.
	Stream bool
	// FilesIn, FilesOut: people send files; the bot sends files.
	FilesIn, FilesOut bool
}

// Boot configures one run of the channel.
type Boot struct {
	// Env is the engine and store the run answers with (the same
	// database and model across the runs of a test).
	Env *storetest.Env
	// Delivery is what the process gives the channel: the suite sets the
	// shutdown grace (a nanosecond: a stop is a crash) and the files.
	Delivery bridge.Delivery
	// Stream shows answers while they are written.
	Stream bool
}

// Harness runs one channel against its platform's fake.
type Harness interface {
	Caps() Caps
	// Start runs the channel as a new process would, and returns it once
	// it takes events, with the function that stops it.
	Start(t *testing.T, b Boot) (c bridge.Channel, stop func())
	// ChatKey is the key of chat i (0 ≤ i < Caps.Chats), each a private
	// chat of an allowed person.
	ChatKey(i int) string
	// Send delivers a person's message in chat i as the platform does,
	// waits until the platform has the acknowledgement, and returns the
	// event's reference for Redeliver.
	Send(t *testing.T, i int, text string) string
	// Redeliver delivers event ref of chat i again, as after a lost
	// acknowledgement.
	Redeliver(t *testing.T, i int, ref string)
	// SendFile delivers a file the person shares in chat i, with text.
	SendFile(t *testing.T, i int, name string, content []byte, text string) string
	// Answers is what the bot has sent to chat i, in order, each message
	// as plain text (a draft as its last text).
	Answers(i int) []string
	// Uploads is the files the bot has sent to chat i, name → content.
	Uploads(i int) map[string][]byte
	// Approve answers the last question in chat i: a press of its
	// Approve button.
	Approve(t *testing.T, i int)
	// Hold holds the bot's messages after the next n (to stop the process
	// mid-send); Release waits until a send the stop abandoned has ended,
	// then lets them through. Both act on the running process's platform.
	Hold(n int)
	Release()
	// Held is how many of the bot's messages Hold holds on their way
	// now (0 for a harness that cannot hold).
	Held() int
}

// Run runs the suite on h.
func Run(t *testing.T, h Harness) {
	caps := h.Caps()
	t.Run("answers in order per chat", func(t *testing.T) { inOrder(t, h) })
	if caps.Chats >= 2 {
		t.Run("chats run at the same time", func(t *testing.T) { concurrent(t, h) })
	}
	if caps.Redeliver {
		t.Run("a redelivered event is answered once", func(t *testing.T) { redelivered(t, h) })
	}
	t.Run("a turn cut by a crash is answered after the restart", func(t *testing.T) { resumed(t, h) })
	if caps.Hold {
		t.Run("a long answer is split and each part sent once across a crash", func(t *testing.T) { partsOnce(t, h) })
	}
	t.Run("a question waits for the person's approval", func(t *testing.T) { asks(t, h) })
	if caps.Stream {
		t.Run("an answer is shown while it is written", func(t *testing.T) { drafts(t, h) })
	}
	if caps.FilesIn {
		t.Run("a file the person sends is kept", func(t *testing.T) { filesIn(t, h) })
	}
	if caps.FilesOut {
		t.Run("the bot sends a file", func(t *testing.T) { filesOut(t, h) })
	}
}

// Wait is how long the suite waits for what must happen.
const Wait = 10 * time.Second

// waitAnswers waits until chat i has n answers and returns them.
func waitAnswers(t *testing.T, h Harness, i, n int) []string {
	t.Helper()
	WaitFor(t, fmt.Sprintf("chat %d's %d answers", i, n), nil, func() bool { return len(h.Answers(i)) >= n })
	return h.Answers(i)
}

// idle waits until ch's pipeline has done all it took on: after it, the
// channel sends nothing more until a new event comes.
func idle(t *testing.T, ch bridge.Channel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := ch.Pipeline().Idle(ctx); err != nil {
		t.Fatalf("the channel's pipeline was still busy after %s", Wait)
	}
}

func start(t *testing.T, h Harness, env *storetest.Env, mut func(*Boot)) (bridge.Channel, func()) {
	t.Helper()
	b := Boot{Env: env, Delivery: bridge.Delivery{ShutdownGrace: time.Nanosecond}}
	if mut != nil {
		mut(&b)
	}
	return h.Start(t, b)
}

func inOrder(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	// The first answer is the slowest: a channel that ran a chat's
	// messages at once would answer them out of order.
	env.Model.Push(chattest.Step{Text: "one", Delay: 200 * time.Millisecond}, chattest.Step{Text: "two"}, chattest.Step{Text: "three"})
	start(t, h, env, nil)
	for _, text := range []string{"first", "second", "third"} {
		h.Send(t, 0, text)
	}
	if got := waitAnswers(t, h, 0, 3); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("answers %q", got)
	}
	var asked []string
	for _, r := range env.Model.Requests() {
		asked = append(asked, r.Messages[len(r.Messages)-1].Content)
	}
	if !slices.Equal(asked, []string{"first", "second", "third"}) {
		t.Fatalf("the model was asked %q", asked)
	}
}

func concurrent(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Push(chattest.Step{Text: "slow", Delay: 2 * time.Second}, chattest.Step{Text: "fast"})
	start(t, h, env, nil)
	h.Send(t, 0, "take your time")
	chattest.Eventually(t, "the first chat's turn to start", func() bool { return len(env.Model.Requests()) == 1 })
	h.Send(t, 1, "quick one")
	if got := waitAnswers(t, h, 1, 1); got[0] != "fast" {
		t.Fatalf("the second chat got %q", got)
	}
	if got := h.Answers(0); len(got) != 0 {
		t.Fatalf("the first chat was answered before the second: %q", got)
	}
	waitAnswers(t, h, 0, 1)
}

func redelivered(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Text("once")
	env.Model.Text("after")
	ch, _ := start(t, h, env, nil)
	ref := h.Send(t, 0, "hello")
	waitAnswers(t, h, 0, 1)
	h.Redeliver(t, 0, ref)
	h.Send(t, 0, "next")
	if got := waitAnswers(t, h, 0, 2); !slices.Equal(got, []string{"once", "after"}) {
		t.Fatalf("answers %q", got)
	}
	// The redelivery was taken (and dropped) before "next" was: once the
	// pipeline is idle, a turn it caused would have run.
	idle(t, ch)
	if n := len(env.Model.Requests()); n != 2 {
		t.Fatalf("%d turns for two messages and a redelivery", n)
	}
}

func resumed(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Push(chattest.Step{Text: "never delivered", Delay: time.Minute})
	_, stop := start(t, h, env, nil)
	h.Send(t, 0, "are you there?")
	chattest.Eventually(t, "the turn to start", func() bool { return len(env.Model.Requests()) == 1 })
	stop()
	env.Model.Text("yes, here")
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: env.DBPath, Model: env.Model})
	ch, _ := start(t, h, env2, nil)
	if got := waitAnswers(t, h, 0, 1); !slices.Equal(got, []string{"yes, here"}) {
		t.Fatalf("answers %q", got)
	}
	idle(t, ch)
	if got := h.Answers(0); len(got) != 1 {
		t.Fatalf("answers %q after the restart", got)
	}
	var n int
	env2.Store.Gorm().Raw("SELECT COUNT(*) FROM messages WHERE role = 'user' AND text = ?", "are you there?").Scan(&n)
	if n != 1 {
		t.Fatalf("the message is in the history %d times", n)
	}
}

// longAnswer is three paragraphs of 3,000 characters: more than one
// message on every platform that splits.
func longAnswer() (string, []string) {
	var paras []string
	for _, w := range []string{"alpha", "bravo", "charlie"} {
		paras = append(paras, strings.TrimSpace(strings.Repeat(w+" ", 500)))
	}
	return strings.Join(paras, "\n\n"), paras
}

func partsOnce(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	text, paras := longAnswer()
	env.Model.Text(text)
	_, stop := start(t, h, env, nil)
	h.Hold(1)
	h.Send(t, 0, "tell me everything")
	waitAnswers(t, h, 0, 1)
	WaitFor(t, "the second part to reach the hold", nil, func() bool { return h.Held() == 1 })
	stop()
	h.Release()
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: env.DBPath, Model: env.Model})
	ch, _ := start(t, h, env2, nil)
	deadline := time.Now().Add(Wait)
	for strings.Count(strings.Join(h.Answers(0), "\n"), "charlie") < 500 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	idle(t, ch)
	got := strings.Join(h.Answers(0), "\n")
	for _, p := range paras {
		w, _, _ := strings.Cut(p, " ")
		if n := strings.Count(got, w); n != 500 {
			t.Fatalf("%q sent %d times over, want 500 (each part once): %d answers", w, n, len(h.Answers(0)))
		}
	}
	if n := len(env.Model.Requests()); n != 1 {
		t.Fatalf("%d turns", n)
	}
}

// dangerous registers a destructive tool that counts its runs.
func dangerous(runs *atomic.Int32) func(*tools.Registry) error {
	return func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive for good.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}
}

func asks(t *testing.T, h Harness) {
	var runs atomic.Int32
	env := storetest.NewEnv(t, storetest.Options{Register: dangerous(&runs)})
	env.Model.Call("purge_archive", `{}`)
	env.Model.Text("The archive is gone.")
	start(t, h, env, nil)
	h.Send(t, 0, "purge the archive")
	got := waitAnswers(t, h, 0, 1)
	if runs.Load() != 0 || !strings.Contains(strings.Join(got, "\n"), "#") {
		t.Fatalf("the call ran (%d) or the question has no code: %q", runs.Load(), got)
	}
	h.Approve(t, 0)
	deadline := time.Now().Add(Wait)
	for !strings.Contains(strings.Join(h.Answers(0), "\n"), "The archive is gone.") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if runs.Load() != 1 || !strings.Contains(strings.Join(h.Answers(0), "\n"), "The archive is gone.") {
		t.Fatalf("after Approve: %d runs, answers %q", runs.Load(), h.Answers(0))
	}
}

func drafts(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Push(chattest.Step{Chunks: []string{"Hello ", "streamed ", "world."}, ChunkDelay: 50 * time.Millisecond})
	ch, _ := start(t, h, env, func(b *Boot) { b.Stream = true })
	h.Send(t, 0, "hi")
	deadline := time.Now().Add(Wait)
	for !slices.Equal(h.Answers(0), []string{"Hello streamed world."}) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	idle(t, ch)
	if got := h.Answers(0); !slices.Equal(got, []string{"Hello streamed world."}) {
		t.Fatalf("answers %q, want the streamed answer once", got)
	}
	if r := env.Model.Requests(); len(r) != 1 || !r[0].Stream {
		t.Fatalf("the answer was not streamed: %d requests", len(r))
	}
}

func workspace(t *testing.T) *files.Workspaces {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func filesIn(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Text("Read it.")
	ws := workspace(t)
	start(t, h, env, func(b *Boot) { b.Delivery.Files = ws })
	h.SendFile(t, 0, "notes.txt", []byte("the notes"), "what does it say?")
	waitAnswers(t, h, 0, 1)
	last := env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.Contains(got, "saved in this chat's workspace as notes.txt") || !strings.Contains(got, "what does it say?") {
		t.Fatalf("the model read %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Dir(h.ChatKey(0)), "notes.txt")); err != nil || string(b) != "the notes" {
		t.Fatalf("the workspace holds %q (%v)", b, err)
	}
}

func filesOut(t *testing.T, h Harness) {
	env := storetest.NewEnv(t, storetest.Options{})
	c, _ := start(t, h, env, nil)
	var hub bridge.Hub
	hub.Add(c, nil)
	path := filepath.Join(t.TempDir(), "report.csv")
	os.WriteFile(path, []byte("a,b\n1,2\n"), 0o600)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if r, ok := c.(bridge.Readier); ok {
		chattest.Eventually(t, "the channel connected", r.Ready)
	}
	if err := hub.SendFile(context.Background(), h.ChatKey(0), "report.csv", f); err != nil {
		t.Fatal(err)
	}
	if got := h.Uploads(0)["report.csv"]; string(got) != "a,b\n1,2\n" {
		t.Fatalf("uploads %q", h.Uploads(0))
	}
	if err := hub.SendFile(context.Background(), "nowhere:1", "x", f); err == nil {
		t.Fatal("a chat of no channel was reached")
	}
}
