package signal

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/signal/signaltest"
	"loadout/chat/chattest"
	"loadout/config"
	"loadout/store/storetest"
	"loadout/tools"
)

// harness is one running channel on the fake daemon, with its logs.
type harness struct {
	t    *testing.T
	env  *storetest.Env
	fake *signaltest.Server
	a    *Adapter
	logs *chattest.LogBuffer
	stop func()
}

func start(t *testing.T, o storetest.Options, mut func(*Config)) *harness {
	h := &harness{t: t, env: storetest.NewEnv(t, o), fake: signaltest.New(t), logs: &chattest.LogBuffer{}}
	cfg := testConfig(h.fake, bridge.Delivery{Logger: slog.New(slog.NewTextHandler(h.logs, nil)), ShutdownGrace: time.Nanosecond})
	if mut != nil {
		mut(&cfg)
	}
	h.a = New(cfg, bridge.NewRouter(h.env.Engine, "loadout"), h.env.Store)
	h.stop = run(t, h.fake, h.a)
	return h
}

// idle waits until every message was taken and the pipeline has done
// all it took on.
func (h *harness) idle() {
	h.t.Helper()
	taken(h.t, h.fake)
	ctx, cancel := context.WithTimeout(context.Background(), signaltest.Wait)
	defer cancel()
	if err := h.a.Pipeline().Idle(ctx); err != nil {
		h.t.Fatal("the pipeline stayed busy")
	}
}

// count is how many rows table holds.
func (h *harness) count(table string) int64 {
	var n int64
	h.env.Store.Gorm().Table(table).Count(&n)
	return n
}

// A stranger is refused once, straight through signal-cli: nothing of
// theirs is stored (no inbox item, no message, no session) and no turn
// runs; the log names their number and the key that lets them in. A
// sender whose number Signal does not share is a stranger unless their
// account id is listed, and then answered.
func TestStrangerRefusedBeforeAnythingIsStored(t *testing.T) {
	h := start(t, storetest.Options{}, nil)
	h.fake.Push(signaltest.Message{From: mallory, Text: "let me in"})
	h.fake.Push(signaltest.Message{From: mallory, Text: "please"})
	anon := signaltest.Person{UUID: "e0000000-0000-4000-8000-000000000005"}
	h.fake.Push(signaltest.Message{From: anon, Text: "hello?"})
	h.idle()
	if got := signaltest.Texts(h.fake.To(mallory)); len(got) != 1 || got[0] != bridge.TextRefused {
		t.Fatalf("Mallory was sent %q, want one refusal", got)
	}
	if got := signaltest.Texts(h.fake.To(anon)); len(got) != 1 || got[0] != bridge.TextRefused {
		t.Fatalf("a sender without a number was sent %q, want one refusal", got)
	}
	if n := h.count("inbox_items"); n != 0 {
		t.Fatalf("%d inbox items after strangers wrote", n)
	}
	if n := h.count("messages") + h.count("sessions"); n != 0 {
		t.Fatalf("%d messages and sessions after strangers wrote", n)
	}
	if n := len(h.env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns for strangers", n)
	}
	logs := h.logs.String()
	for _, want := range []string{mallory.Number, anon.UUID, "signal.allowed_numbers", "signal.allowed_uuids"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %s:\n%s", want, logs)
		}
	}
	h.env.Model.Text("hi Uma")
	h.fake.Push(signaltest.Message{From: uma, Text: "hello"})
	h.fake.WaitFor(t, "Uma's answer", func() bool { return len(h.fake.To(uma)) == 1 })
	if got := h.fake.To(uma)[0]; got.Text != "hi Uma" || got.To != uma.UUID {
		t.Fatalf("Uma was sent %+v", got)
	}
	if ok, _ := h.a.Admits(context.Background(), "signal:"+uma.UUID); !ok {
		t.Error("Uma, allowed by her account id, is not admitted")
	}
	if ok, _ := h.a.Admits(context.Background(), "signal:"+mallory.UUID); ok {
		t.Error("Mallory is admitted")
	}
}

// A person let in by their number is known by their account id once
// they wrote (the web side's Admitter).
func TestAdmitsByTheNumberOnceWritten(t *testing.T) {
	h := start(t, storetest.Options{}, nil)
	ctx := context.Background()
	if ok, _ := h.a.Admits(ctx, "signal:"+ana.UUID); ok {
		t.Fatal("Ana admitted before she wrote: her account id is not listed")
	}
	h.env.Model.Text("hello")
	h.fake.Push(signaltest.Message{From: ana, Text: "hi"})
	h.idle()
	for key, want := range map[string]bool{"signal:" + ana.UUID: true, "signal:" + mallory.UUID: false, "signal:group:abc": false, "telegram:1": false} {
		if ok, err := h.a.Admits(ctx, key); ok != want || err != nil {
			t.Errorf("Admits(%s) = %v, %v; want %v", key, ok, err, want)
		}
	}
}

// In a group, a message counts when it mentions the bot or quotes one
// of its messages; the answer goes to the group, quoting it. The group
// is a chat of its own, apart from the person's direct chat.
func TestGroupsAnswerMentionsAndQuotes(t *testing.T) {
	h := start(t, storetest.Options{}, nil)
	const group = "R3JvdXBPbmU+/=="
	h.fake.Push(signaltest.Message{From: ana, Group: group, Text: "just chatting"})
	h.idle()
	if n := len(h.env.Model.Requests()); n != 0 || h.count("inbox_items") != 0 {
		t.Fatalf("a group message for nobody ran %d turns", n)
	}
	h.env.Model.Text("first")
	asked := h.fake.Push(signaltest.Message{From: ana, Group: group, Mention: true, Text: "what time is it?"})
	h.fake.WaitFor(t, "the group's answer", func() bool { return len(h.fake.InGroup(group)) == 1 })
	got := h.fake.InGroup(group)[0]
	if got.Text != "first" || got.QuoteTS != asked {
		t.Fatalf("the group was sent %+v, want the answer quoting %d", got, asked)
	}
	if last := h.env.Model.Last(t).Messages; last[len(last)-1].Content != "what time is it?" {
		t.Fatalf("the model read %q, want the text without the mention", last[len(last)-1].Content)
	}
	h.env.Model.Text("second")
	h.fake.Push(signaltest.Message{From: bea, Group: group, Quote: got.TS, Text: "and tomorrow?"})
	h.fake.WaitFor(t, "the answer to the quote", func() bool { return len(h.fake.InGroup(group)) == 2 })
	h.idle()
	if !h.a.Private("signal:"+ana.UUID) || h.a.Private("signal:group:"+group) {
		t.Error("Private mixes up direct chats and groups")
	}
	var keys []string
	h.env.Store.Gorm().Table("inbox_items").Distinct("chat_key").Pluck("chat_key", &keys)
	if len(keys) != 1 || keys[0] != "signal:group:"+group {
		t.Fatalf("chat keys %q, want the group's alone", keys)
	}
}

// Receipts, typing, sync, call, story and edit envelopes, and data
// messages with nothing to read, are not messages: nothing is stored and
// no turn runs.
func TestOnlyPeoplesMessagesCount(t *testing.T) {
	h := start(t, storetest.Options{}, nil)
	for _, parts := range []map[string]any{
		{"receiptMessage": map[string]any{"when": 1, "isDelivery": true, "timestamps": []int64{1}}},
		{"typingMessage": map[string]any{"action": "STARTED", "timestamp": 1}},
		{"syncMessage": map[string]any{"sentMessage": map[string]any{"destination": ana.Number, "message": "from another device"}}},
		{"callMessage": map[string]any{"offerMessage": map[string]any{"id": 1}}},
		{"storyMessage": map[string]any{"allowsReplies": true}},
		{"editMessage": map[string]any{"targetSentTimestamp": 1, "dataMessage": map[string]any{"message": "edited"}}},
		{"dataMessage": map[string]any{"timestamp": 1, "sticker": map[string]any{"packId": "x", "stickerId": 1}}},
		{"dataMessage": map[string]any{"timestamp": 1, "remoteDelete": map[string]any{"timestamp": 1}}},
		{"dataMessage": map[string]any{"timestamp": 1, "reaction": map[string]any{"emoji": "👍", "targetAuthorNumber": ana.Number, "targetSentTimestamp": 1}}},
	} {
		h.fake.Envelope(ana, parts)
	}
	h.idle()
	if n := len(h.env.Model.Requests()); n != 0 || h.count("inbox_items") != 0 || len(h.fake.Sent()) != 0 {
		t.Fatalf("%d turns, %d inbox items, %d sent for envelopes that are not messages", n, h.count("inbox_items"), len(h.fake.Sent()))
	}
}

// dangerous registers a destructive tool that counts its runs.
func dangerous(runs *atomic.Int32) func(*tools.Registry) error {
	return func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive for good.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}
}

// A question is answered by the reaction of the person asked alone:
// another person's 👍 in the group is told it is not theirs and decides
// nothing; a reaction to another message means nothing.
func TestOnlyTheAskerAnswersByReaction(t *testing.T) {
	var runs atomic.Int32
	h := start(t, storetest.Options{Register: dangerous(&runs)}, nil)
	const group = "Z3JvdXBUd28="
	h.env.Model.Call("purge_archive", `{}`)
	h.env.Model.Text("The archive is gone.")
	h.fake.Push(signaltest.Message{From: ana, Group: group, Mention: true, Text: "purge the archive"})
	h.fake.WaitFor(t, "the question", func() bool { _, ok := lastQuestion(h.fake.InGroup(group)); return ok })
	q, _ := lastQuestion(h.fake.InGroup(group))
	if !strings.Contains(q.Text, "👎") || !strings.Contains(q.Text, "/approve #") {
		t.Fatalf("the question says %q", q.Text)
	}
	h.fake.React(bea, group, q.TS, "👍")
	defer func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	}()
	h.fake.WaitFor(t, "Bea told", func() bool { return len(h.fake.InGroup(group)) == 2 })
	if got := h.fake.InGroup(group)[1].Text; got != bridge.TextNotYours || runs.Load() != 0 {
		t.Fatalf("after Bea's reaction: %q, %d runs", got, runs.Load())
	}
	h.fake.React(ana, group, q.TS-1, "👍") // not the question
	h.fake.React(ana, group, q.TS, "❤️")  // not an answer
	taken(t, h.fake)
	if runs.Load() != 0 {
		t.Fatal("a reaction that answers nothing ran the call")
	}
	h.fake.React(ana, group, q.TS, "👍🏽")
	h.fake.WaitFor(t, "the answer", func() bool {
		return strings.Contains(strings.Join(signaltest.Texts(h.fake.InGroup(group)), "\n"), "The archive is gone.")
	})
	if runs.Load() != 1 {
		t.Fatalf("%d runs after Ana's reaction", runs.Load())
	}
}

// "typing…" shows while a turn runs and is taken away after.
func TestTypingWhileWorking(t *testing.T) {
	h := start(t, storetest.Options{}, nil)
	h.env.Model.Push(chattest.Step{Text: "done", Delay: 100 * time.Millisecond})
	h.fake.Push(signaltest.Message{From: ana, Text: "hi"})
	h.fake.WaitFor(t, "the answer", func() bool { return len(h.fake.To(ana)) == 1 })
	bridgetest.WaitFor(t, "typing to stop", nil, func() bool {
		c := h.fake.Calls("sendTyping")
		return len(c) >= 2 && c[len(c)-1].Params["stop"] == true
	})
	if first := h.fake.Calls("sendTyping")[0].Params; first["stop"] != nil || first["recipient"].([]any)[0] != ana.UUID {
		t.Fatalf("the first sendTyping was %v", first)
	}
}

// A stop lets the receive call under way finish and stores what it
// brought: a message that arrives during it is answered after the
// restart, not lost with the call.
func TestStopKeepsWhatTheLastCallBrought(t *testing.T) {
	h := start(t, storetest.Options{}, func(c *Config) { c.PollTimeout = time.Second })
	bridgetest.WaitFor(t, "a receive call", nil, func() bool { return len(h.fake.Calls("receive")) > 0 })
	stopped := make(chan struct{})
	go func() { h.stop(); close(stopped) }()
	h.fake.Push(signaltest.Message{From: ana, Text: "are you there?"})
	<-stopped
	if h.fake.Queued() != 0 {
		t.Fatal("the message was not taken by the call under way")
	}
	h.env.Model.Text("yes")
	a := New(testConfig(h.fake, bridge.Delivery{Logger: slog.New(slog.NewTextHandler(h.logs, nil))}), bridge.NewRouter(h.env.Engine, "loadout"), h.env.Store)
	run(t, h.fake, a)
	h.fake.WaitFor(t, "the answer after the restart", func() bool { return len(h.fake.To(ana)) == 1 })
}

// Calls that may pass are tried again; one signal-cli refuses is not.
func TestRetries(t *testing.T) {
	h := start(t, storetest.Options{}, nil)
	h.fake.Fail("send", codeIO, "Failed to send message")
	h.fake.Fail("send", codeRateLimit, "Failed to send message due to rate limiting")
	h.env.Model.Text("made it")
	h.fake.Push(signaltest.Message{From: ana, Text: "hi"})
	h.fake.WaitFor(t, "the answer", func() bool { return len(h.fake.To(ana)) == 1 })
	if n := len(h.fake.Calls("send")); n != 3 {
		t.Fatalf("%d send calls, want 3", n)
	}
	if ok, _ := retryable(&RPCError{Code: codeUntrusted}); ok {
		t.Error("an untrusted identity is retried")
	}
	if !alreadyReceiving(&RPCError{Method: "receive", Code: codeUser, Message: "Receive command cannot be used if messages are already being received."}) {
		t.Error("signal-cli receiving already is not recognised")
	}
}

// A bad value names its key; a good section passes.
func TestConfigCheck(t *testing.T) {
	check := func(c Config) string {
		ch := &config.Checker{Section: "signal", Set: config.Set{}}
		c.Check(ch)
		var out []string
		for _, e := range ch.Errors() {
			out = append(out, e.Error())
		}
		return strings.Join(out, "\n")
	}
	good := Config{Account: "+1 555 000-0000", AllowedNumbers: []string{"+15551230001", "0044 20 7946 0000"}, AllowedUUIDs: []string{uma.UUID}}
	if got := check(good); got != "" {
		t.Fatalf("a good section: %s", got)
	}
	for name, c := range map[string]Config{
		"config: signal.allowed_numbers: must hold phone numbers in international form": {Account: "+15550000000", AllowedNumbers: []string{"5551230001"}},
		"config: signal.account:":       {Account: "bot"},
		"config: signal.allowed_uuids:": {Account: "+15550000000", AllowedUUIDs: []string{"not-a-uuid"}},
		"config: signal.rpc_url:":       {Account: "+15550000000", RPCURL: "127.0.0.1:8080"},
		"config: signal.poll_timeout:":  {Account: "+15550000000", PollTimeout: time.Millisecond},
	} {
		if got := check(c); !strings.Contains(got, name) {
			t.Errorf("want %q, got %q", name, got)
		}
	}
	if got := check(Config{Account: "+15550000000", RPCURL: "ftp://user:hunter2@host"}); strings.Contains(got, "hunter2") {
		t.Errorf("the error shows the URL's password: %s", got)
	}
	for in, want := range map[string]string{"+1 (555) 123-4567": "+15551234567", "0015551234567": "+15551234567", "15551234567": "",
		"+0123456789": "", "+1234": "", "+1555abc4567": "", "+1234567890123456": ""} {
		if got := E164(in); got != want {
			t.Errorf("E164(%q) = %q, want %q", in, got, want)
		}
	}
}

// The channel serves no HTTP endpoint: nothing can be posted to it as
// if signal-cli had received it.
func TestServesNoEndpoint(t *testing.T) {
	if _, ok := any(&Adapter{}).(bridge.Mounter); ok {
		t.Fatal("the Signal channel mounts endpoints")
	}
}
