package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/bridge"
	"loadout/bridge/slack/slacktest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
)

const (
	owner  = "UOWNER"
	secret = "signing-secret"
)

type harness struct {
	fake    *slacktest.Server
	env     *storetest.Env
	adapter *Adapter
	logs    *chattest.LogBuffer
	cancel  context.CancelFunc
	done    chan error
	waits   chan time.Duration
	// envelopes numbers Socket Mode envelopes sent by event.
	envelopes int
}

type options struct {
	mode     string
	register func(r *tools.Registry) error
	channels []string
	chunk    int
	stream   bool
	files    bridge.FileSaver
	voice    bridge.Voice
	// allowed is slack.allowed_users; default just owner.
	allowed []string
}

// start runs an adapter against a fake Slack and a fake model. Cleanup
// cancels it and checks that Run returned nil.
func start(t *testing.T, o options) *harness {
	t.Helper()
	h := &harness{fake: slacktest.NewServer(t), logs: &chattest.LogBuffer{}, done: make(chan error, 1), waits: make(chan time.Duration, 100)}
	h.env = storetest.NewEnv(t, storetest.Options{Register: o.register})
	router := bridge.NewRouter(h.env.Engine, "loadout")
	if o.allowed == nil {
		o.allowed = []string{owner}
	}
	h.adapter = New(Config{
		BotToken: "xoxb-test", AppToken: "xapp-test", SigningSecret: secret, Mode: o.mode,
		APIURL: h.fake.APIURL, AllowedUsers: o.allowed, AllowedChannels: o.channels,
		Workers: 4, Backoff: time.Millisecond, ChunkSize: o.chunk,
		SendPerChannelSecond: -1, // lifted; TestDefaultPacing checks the limit
		Stream:               o.stream,
		Delivery: bridge.Delivery{ShutdownGrace: 5 * time.Second, Files: o.files, Voice: o.voice,
			Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	}, router, h.env.Store)
	h.adapter.sleep = func(ctx context.Context, d time.Duration) error {
		h.waits <- d
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.adapter.Run(ctx) }()
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
	h.fake.WaitCalls(t, "auth.test", 1)
	return h
}

// stop cancels Run and waits for it; it is safe to call twice.
func (h *harness) stop() error {
	h.cancel()
	select {
	case err, ok := <-h.done:
		if ok {
			close(h.done)
		}
		return err
	case <-time.After(slacktest.Wait):
		return fmt.Errorf("Run did not return")
	}
}

// event delivers an event over Socket Mode and waits for its ack.
func (h *harness) event(t *testing.T, eventID string, e slacktest.Event) string {
	t.Helper()
	h.envelopes++
	id := fmt.Sprintf("env-%d", h.envelopes)
	h.fake.Send(t, id, "events_api", slacktest.Callback(eventID, e), 0)
	h.fake.WaitAck(t, id)
	return id
}

func TestDirectMessage(t *testing.T) {
	h := start(t, options{})
	h.env.Model.Text("Hello **there**")
	h.event(t, "Ev1", slacktest.DM("D1", owner, "hi &amp; welcome", "100.1"))

	posts := h.fake.WaitCalls(t, "chat.postMessage", 1)
	if p := posts[0].Params; p["channel"] != "D1" || p["text"] != "Hello *there*" || p["thread_ts"] != "" {
		t.Fatalf("post = %v", p)
	}
	if posts[0].Token != "xoxb-test" {
		t.Errorf("token = %q", posts[0].Token)
	}
	if last := h.env.Model.Last(t).Messages; last[len(last)-1].Content != "hi & welcome" {
		t.Errorf("model got %q", last[len(last)-1].Content)
	}
	add := h.fake.WaitCalls(t, "reactions.add", 1)[0].Params
	if add["name"] != WorkingReaction || add["channel"] != "D1" || add["timestamp"] != "100.1" {
		t.Errorf("reaction = %v", add)
	}
	if rm := h.fake.WaitCalls(t, "reactions.remove", 1)[0].Params; rm["timestamp"] != "100.1" {
		t.Errorf("reaction removed = %v", rm)
	}

	// The second message continues the same session.
	h.env.Model.Text("again")
	h.event(t, "Ev2", slacktest.DM("D1", owner, "second", "100.2"))
	h.fake.WaitCalls(t, "chat.postMessage", 2)
	if !hasContent(h.env.Model.Last(t).Messages, "hi & welcome") {
		t.Error("the second turn lost the first message: not the same session")
	}
	st, err := h.env.Engine.Status(context.Background(), "slack:"+slacktest.TeamID+":D1")
	if err != nil || st.Messages < 4 {
		t.Errorf("session slack:T0001:D1 has %d messages (err %v), want at least 4", st.Messages, err)
	}
}

func hasContent(msgs []goopenai.ChatCompletionMessage, s string) bool {
	for _, m := range msgs {
		if strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

func TestMentionStartsThreadAndContinuesIt(t *testing.T) {
	h := start(t, options{})
	h.env.Model.Text("first answer")
	h.event(t, "Ev1", slacktest.Mention("C1", owner, "<@"+slacktest.BotUserID+"> remember blue", "200.1", ""))
	p := h.fake.WaitCalls(t, "chat.postMessage", 1)[0].Params
	if p["channel"] != "C1" || p["thread_ts"] != "200.1" {
		t.Fatalf("reply not in the new thread: %v", p)
	}
	if got := h.env.Model.Last(t).Messages; got[len(got)-1].Content != "remember blue" {
		t.Errorf("model got %q, want the text without the mention", got[len(got)-1].Content)
	}

	h.env.Model.Text("second answer")
	h.event(t, "Ev2", slacktest.Mention("C1", owner, "<@"+slacktest.BotUserID+"> what colour?", "200.5", "200.1"))
	p = h.fake.WaitCalls(t, "chat.postMessage", 2)[1].Params
	if p["thread_ts"] != "200.1" {
		t.Fatalf("reply not in the thread: %v", p)
	}
	if !hasContent(h.env.Model.Last(t).Messages, "remember blue") {
		t.Error("a mention in the thread did not continue the thread's session")
	}

	// Another top-level mention is a new conversation.
	h.env.Model.Text("third answer")
	h.event(t, "Ev3", slacktest.Mention("C1", owner, "<@"+slacktest.BotUserID+"> hello", "300.1", ""))
	p = h.fake.WaitCalls(t, "chat.postMessage", 3)[2].Params
	if p["thread_ts"] != "300.1" {
		t.Fatalf("reply = %v", p)
	}
	if hasContent(h.env.Model.Last(t).Messages, "remember blue") {
		t.Error("a new top-level mention reused another thread's session")
	}
}

func TestIgnoresOwnBotsSubtypesAndPlainChannelMessages(t *testing.T) {
	h := start(t, options{channels: []string{"C1"}})
	own := slacktest.DM("D1", slacktest.BotUserID, "my own", "1.1")
	bot := slacktest.DM("D1", "UOTHERBOT", "bot says", "1.2")
	bot["bot_id"] = "B9"
	edit := slacktest.DM("D1", owner, "edited", "1.3")
	edit["subtype"] = "message_changed"
	join := slacktest.DM("D1", owner, "joined", "1.4")
	join["subtype"] = "channel_join"
	plain := slacktest.DM("C1", owner, "no mention", "1.5")
	plain["channel_type"] = "channel"
	elsewhere := slacktest.Mention("C2", owner, "<@UBOT> hi", "1.6", "")
	for i, e := range []slacktest.Event{own, bot, edit, join, plain, elsewhere} {
		h.event(t, fmt.Sprintf("EvIgnored%d", i), e)
	}
	h.env.Model.Text("answer")
	h.event(t, "EvReal", slacktest.DM("D1", owner, "real", "1.7"))
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	if n := len(h.env.Model.Requests()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
	if n := len(h.fake.Calls("chat.postMessage")); n != 1 {
		t.Errorf("%d posts, want 1", n)
	}
}

func TestClearAndStatusAsTextInDM(t *testing.T) {
	h := start(t, options{})
	h.event(t, "Ev1", slacktest.DM("D1", owner, "hello", "1.1"))
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	h.event(t, "Ev2", slacktest.DM("D1", owner, "/clear", "1.2"))
	p := h.fake.WaitCalls(t, "chat.postMessage", 2)[1].Params
	if !strings.HasPrefix(p["text"], "Started a new conversation") {
		t.Fatalf("/clear answered %q", p["text"])
	}
	h.event(t, "Ev3", slacktest.DM("D1", owner, "status", "1.3"))
	p = h.fake.WaitCalls(t, "chat.postMessage", 3)[2].Params
	if !strings.Contains(p["text"], "Messages: 0") {
		t.Fatalf("status after clear = %q", p["text"])
	}
	if n := len(h.env.Model.Requests()); n != 1 {
		t.Errorf("commands reached the model: %d requests", n)
	}
}

func TestSlashCommandOverSocket(t *testing.T) {
	h := start(t, options{})
	h.event(t, "Ev1", slacktest.DM("D1", owner, "hello", "1.1"))
	h.fake.WaitCalls(t, "chat.postMessage", 1)

	h.fake.Send(t, "env-cmd", "slash_commands", slacktest.SlashCommand("D1", owner, "clear", h.fake.ResponseURL("1")), 0)
	h.fake.WaitAck(t, "env-cmd")
	r := h.fake.WaitCalls(t, "response_url", 1)[0].Params
	if !strings.HasPrefix(r["text"], "Started a new conversation") || r["response_type"] != "ephemeral" {
		t.Fatalf("response = %v", r)
	}
	st, err := h.env.Engine.Status(context.Background(), "slack:"+slacktest.TeamID+":D1")
	if err != nil || st.Messages != 0 {
		t.Errorf("after /loadout clear the DM session has %d messages (err %v)", st.Messages, err)
	}

	h.fake.Send(t, "env-help", "slash_commands", slacktest.SlashCommand("C1", owner, "", h.fake.ResponseURL("2")), 0)
	r = h.fake.WaitCalls(t, "response_url", 2)[1].Params
	if !strings.Contains(r["text"], "/clear") {
		t.Errorf("help = %q", r["text"])
	}
	h.fake.Send(t, "env-chan", "slash_commands", slacktest.SlashCommand("C1", owner, "clear", h.fake.ResponseURL("3")), 0)
	r = h.fake.WaitCalls(t, "response_url", 3)[2].Params
	if r["text"] != Mrkdwn(textSlashThread) {
		t.Errorf("clear in a channel = %q", r["text"])
	}
}

func TestUnknownUserRefusedOnce(t *testing.T) {
	h := start(t, options{})
	h.event(t, "Ev1", slacktest.DM("D9", "USTRANGER", "hi", "1.1"))
	p := h.fake.WaitCalls(t, "chat.postMessage", 1)[0].Params
	if p["text"] != Mrkdwn(bridge.TextRefused) || p["channel"] != "D9" {
		t.Fatalf("refusal = %v", p)
	}
	h.event(t, "Ev2", slacktest.DM("D9", "USTRANGER", "hello?", "1.2"))
	h.event(t, "Ev3", slacktest.DM("D1", owner, "me", "1.3"))
	posts := h.fake.WaitCalls(t, "chat.postMessage", 2)
	if len(posts) != 2 || posts[1].Params["channel"] != "D1" {
		t.Errorf("posts = %v, want one refusal then the owner's answer", posts)
	}
	if n := len(h.env.Model.Requests()); n != 1 {
		t.Errorf("model called %d times, want 1", n)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "USTRANGER") || !strings.Contains(logs, "slack.allowed_users") {
		t.Errorf("log does not name the id and slack.allowed_users:\n%s", logs)
	}
}

func TestRateLimitAndTransientErrorsAreRetried(t *testing.T) {
	h := start(t, options{})
	h.fake.Fail("chat.postMessage",
		slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "7"},
		slacktest.Failure{Status: http.StatusBadGateway},
		slacktest.Failure{Error: "internal_error"})
	h.env.Model.Text("made it")
	h.event(t, "Ev1", slacktest.DM("D1", owner, "hi", "1.1"))
	posts := h.fake.WaitCalls(t, "chat.postMessage", 4)
	if posts[3].Params["text"] != "made it" {
		t.Errorf("final post = %v", posts[3].Params)
	}
	if w := <-h.waits; w != 7*time.Second {
		t.Errorf("first wait = %s, want Retry-After 7s", w)
	}
	if w := <-h.waits; w != time.Millisecond {
		t.Errorf("second wait = %s, want the first backoff", w)
	}
	if w := <-h.waits; w != 2*time.Millisecond {
		t.Errorf("third wait = %s, want the doubled backoff", w)
	}
}

func TestPermanentErrorIsNotRetriedAndNothingCrashes(t *testing.T) {
	h := start(t, options{})
	h.fake.Fail("chat.postMessage", slacktest.Failure{Error: "channel_not_found"})
	h.event(t, "Ev1", slacktest.DM("D1", owner, "hi", "1.1"))
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	h.event(t, "Ev2", slacktest.DM("D1", owner, "again", "1.2"))
	posts := h.fake.WaitCalls(t, "chat.postMessage", 2)
	if len(posts) != 2 {
		t.Errorf("%d posts, want 2: a permanent error must not be retried", len(posts))
	}
}

func TestLongAnswerIsSplitOutsideCodeBlocks(t *testing.T) {
	h := start(t, options{chunk: 500})
	var b strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, "Paragraph %d has **some** words in it to make it longer than a line.\n\n", i)
	}
	b.WriteString("```go\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "fmt.Println(%d) // a < b\n", i)
	}
	b.WriteString("```\n\nThe end.")
	h.env.Model.Text(b.String())
	h.event(t, "Ev1", slacktest.Mention("C1", owner, "<@UBOT> long", "9.1", ""))
	want := len(bridge.Split(b.String(), 500))
	if want < 3 {
		t.Fatalf("the answer splits into %d chunks; make it longer", want)
	}
	posts := h.fake.WaitCalls(t, "chat.postMessage", want)
	var all strings.Builder
	for _, p := range posts {
		text := p.Params["text"]
		if len([]rune(text)) > 600 {
			t.Errorf("chunk of %d characters", len([]rune(text)))
		}
		if strings.Count(text, "```")%2 != 0 {
			t.Errorf("chunk leaves a code block open:\n%s", text)
		}
		if p.Params["thread_ts"] != "9.1" {
			t.Errorf("chunk not in the thread: %v", p.Params)
		}
		all.WriteString(text)
	}
	if !strings.HasSuffix(strings.TrimSpace(posts[len(posts)-1].Params["text"]), "The end.") {
		t.Error("chunks out of order")
	}
	if !strings.Contains(all.String(), "fmt.Println(29) // a &lt; b") || strings.Contains(all.String(), "```go") {
		t.Error("code lines lost, unescaped or language kept")
	}
}

func TestFullTurnLoadsAGroupAndUsesIt(t *testing.T) {
	type echoIn struct {
		Text string `json:"text" desc:"what to echo"`
	}
	echo := tools.New[echoIn](tools.Definition{Name: "demo_echo", Description: "Echo text back."},
		func(ctx context.Context, in echoIn) (any, error) {
			return map[string]string{"echo": in.Text, "user": tools.CallerFrom(ctx).UserKey}, nil
		})
	h := start(t, options{register: func(r *tools.Registry) error {
		return r.AddGroup(tools.Group{Name: "demo", Description: "Demo tools."}, echo)
	}})
	m := h.env.Model
	m.Call("load_tool_group", `{"group_name":"demo"}`)
	m.Call("demo_echo", `{"text":"ping"}`)
	m.Text("Echoed: **ping** via [docs](https://example.com/a?b=1&c=2)")
	h.event(t, "Ev1", slacktest.DM("D1", owner, "echo ping", "1.1"))
	p := h.fake.WaitCalls(t, "chat.postMessage", 1)[0].Params
	if want := "Echoed: *ping* via <https://example.com/a?b=1&amp;c=2|docs>"; p["text"] != want {
		t.Errorf("reply = %q, want %q", p["text"], want)
	}
	reqs := m.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if names := chattest.ToolNames(reqs[0]); contains(names, "demo_echo") {
		t.Errorf("first request already carried demo_echo: %v", names)
	}
	if names := chattest.ToolNames(reqs[1]); !contains(names, "demo_echo") {
		t.Errorf("after load_tool_group the tools are %v", names)
	}
	if !hasContent(reqs[2].Messages, `"user":"slack:T0001:UOWNER"`) {
		t.Error("the tool did not see the Slack user key")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestShutdownLetsInFlightTurnFinish(t *testing.T) {
	h := start(t, options{})
	h.env.Model.Push(chattest.Step{Text: "finished", Delay: 300 * time.Millisecond})
	h.event(t, "Ev1", slacktest.DM("D1", owner, "slow", "1.1"))
	deadline := time.Now().Add(slacktest.Wait)
	for len(h.env.Model.Requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	posts := h.fake.Calls("chat.postMessage")
	if len(posts) != 1 || posts[0].Params["text"] != "finished" {
		t.Errorf("posts after shutdown = %v, want the finished answer", posts)
	}
}

func TestSocketReconnectsWhenAsked(t *testing.T) {
	h := start(t, options{})
	h.fake.WaitConnected(t)
	h.fake.Disconnect(t)
	h.fake.WaitCalls(t, "apps.connections.open", 2)
	h.event(t, "Ev1", slacktest.DM("D1", owner, "after reconnect", "1.1"))
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	if c := h.fake.Calls("apps.connections.open")[0]; c.Token != "xapp-test" {
		t.Errorf("apps.connections.open used token %q", c.Token)
	}
}

// Events API

type eventsServer struct {
	*harness
	url string
}

func startEvents(t *testing.T) *eventsServer {
	h := start(t, options{mode: ModeEvents})
	// auth.test has been answered; events are refused until its answer is
	// read.
	chattest.Eventually(t, "the adapter to know its workspace", h.adapter.identified)
	return serveEvents(t, h)
}

// serveEvents serves h's Events API, slash command and interactivity
// endpoints as loadout mounts them.
func serveEvents(t *testing.T, h *harness) *eventsServer {
	mux := http.NewServeMux()
	mux.Handle("POST /slack/events", h.adapter.EventsHandler())
	mux.Handle("POST /slack/commands", h.adapter.CommandsHandler())
	mux.Handle("POST /slack/interactivity", h.adapter.InteractivityHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &eventsServer{h, srv.URL}
}

func (e *eventsServer) post(t *testing.T, path string, body []byte, h http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if path == "/slack/commands" || path == "/slack/interactivity" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: slacktest.Wait}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp, b.String()
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEventsAPI(t *testing.T) {
	e := startEvents(t)
	now := time.Now()

	t.Run("url_verification", func(t *testing.T) {
		body := mustJSON(t, map[string]string{"type": "url_verification", "token": "x", "challenge": "abc123"})
		resp, out := e.post(t, "/slack/events", body, slacktest.Sign(secret, now, body))
		if resp.StatusCode != 200 || !strings.Contains(out, `"challenge":"abc123"`) {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
	})

	dm := mustJSON(t, slacktest.Callback("EvHTTP1", slacktest.DM("D1", owner, "over http", "1.1")))
	t.Run("wrong signature", func(t *testing.T) {
		resp, _ := e.post(t, "/slack/events", dm, slacktest.Sign("not-the-secret", now, dm))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", resp.StatusCode)
		}
		resp, _ = e.post(t, "/slack/events", dm, nil)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("unsigned: status %d", resp.StatusCode)
		}
	})
	t.Run("stale timestamp", func(t *testing.T) {
		resp, _ := e.post(t, "/slack/events", dm, slacktest.Sign(secret, now.Add(-6*time.Minute), dm))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if !strings.Contains(e.logs.String(), "stale timestamp") {
			t.Error("no log line for the stale timestamp")
		}
	})
	if n := len(e.env.Model.Requests()); n != 0 {
		t.Fatalf("rejected requests reached the model: %d", n)
	}

	t.Run("signed message and retry", func(t *testing.T) {
		e.env.Model.Text("http answer")
		resp, _ := e.post(t, "/slack/events", dm, slacktest.Sign(secret, now, dm))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if p := e.fake.WaitCalls(t, "chat.postMessage", 1)[0].Params; p["text"] != "http answer" || p["channel"] != "D1" {
			t.Fatalf("post = %v", p)
		}
		h := slacktest.Sign(secret, now, dm)
		h.Set("X-Slack-Retry-Num", "1")
		h.Set("X-Slack-Retry-Reason", "http_timeout")
		resp, _ = e.post(t, "/slack/events", dm, h)
		if resp.StatusCode != 200 {
			t.Fatalf("retry status %d", resp.StatusCode)
		}
		next := mustJSON(t, slacktest.Callback("EvHTTP2", slacktest.DM("D1", owner, "next", "1.2")))
		e.post(t, "/slack/events", next, slacktest.Sign(secret, now, next))
		e.fake.WaitCalls(t, "chat.postMessage", 2)
		if n := len(e.env.Model.Requests()); n != 2 {
			t.Errorf("model called %d times, want 2: the retry must not be answered", n)
		}
	})

	t.Run("slash command", func(t *testing.T) {
		form := slacktest.Form(slacktest.SlashCommand("D1", owner, "status", e.fake.ResponseURL("s1")))
		resp, _ := e.post(t, "/slack/commands", form, slacktest.Sign(secret, now, form))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		r := e.fake.WaitCalls(t, "response_url", 1)[0].Params
		if !strings.Contains(r["text"], "Messages: 4") || r["id"] != "s1" {
			t.Errorf("status response = %v", r)
		}
		resp, _ = e.post(t, "/slack/commands", form, slacktest.Sign("wrong", now, form))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("wrongly signed command: status %d", resp.StatusCode)
		}
	})

	t.Run("acknowledged before the turn ends", func(t *testing.T) {
		e.env.Model.Push(chattest.Step{Text: "late", Delay: time.Minute})
		body := mustJSON(t, slacktest.Callback("EvSlow", slacktest.DM("D1", owner, "slow", "1.3")))
		resp, _ := e.post(t, "/slack/events", body, slacktest.Sign(secret, now, body))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		for _, p := range e.fake.Calls("chat.postMessage") {
			if p.Params["text"] == "late" {
				t.Fatal("the answer came before the acknowledgement")
			}
		}
		// Shut down with a short grace so the slow turn is cancelled.
		e.adapter.cfg.ShutdownGrace = 10 * time.Millisecond
	})
}

func TestRejectedTokensStopRunWithAnError(t *testing.T) {
	fake := slacktest.NewServer(t)
	env := storetest.NewEnv(t, storetest.Options{})
	quiet := slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	for _, c := range []struct{ bot, app, want string }{
		{"bad-bot", "xapp-test", "slack.bot_token"},
		{"xoxb-test", "not-an-app-token", "slack.app_token"},
	} {
		a := New(Config{BotToken: c.bot, AppToken: c.app, APIURL: fake.APIURL, Backoff: time.Millisecond, Delivery: bridge.Delivery{Logger: quiet}},
			bridge.NewRouter(env.Engine, "loadout"), env.Store)
		done := make(chan error, 1)
		go func() { done <- a.Run(context.Background()) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Run = %v, want an error naming %s", err, c.want)
			}
		case <-time.After(slacktest.Wait):
			t.Fatalf("Run kept going with a rejected %s", c.want)
		}
	}
}

func TestNotifyReachesDMAndThread(t *testing.T) {
	h := start(t, options{})
	ctx := context.Background()
	var hub bridge.Hub
	hub.Add(h.adapter, nil)
	// A notice waits for the channel to be connected.
	chattest.Eventually(t, "connected", h.adapter.Ready)
	if err := hub.Notify(ctx, "slack:T0001:D1", "Google is **connected**."); err != nil {
		t.Fatal(err)
	}
	if err := hub.Notify(ctx, "slack:T0001:C1:200.1", "in the thread"); err != nil {
		t.Fatal(err)
	}
	posts := h.fake.WaitCalls(t, "chat.postMessage", 2)
	if p := posts[0].Params; p["channel"] != "D1" || p["thread_ts"] != "" || p["text"] != "Google is *connected*." {
		t.Errorf("DM notice = %v", p)
	}
	if p := posts[1].Params; p["channel"] != "C1" || p["thread_ts"] != "200.1" {
		t.Errorf("thread notice = %v", p)
	}
	if err := hub.Notify(ctx, "telegram:1", "x"); err == nil {
		t.Error("a Telegram key was accepted")
	}
	h.fake.Fail("chat.postMessage", slacktest.Failure{Error: "channel_not_found"})
	if err := hub.Notify(ctx, "slack:T0001:D404", "x"); err == nil {
		t.Error("a refused post reported success")
	}
}

func TestStartupWaitsForSlack(t *testing.T) {
	fake := slacktest.NewServer(t)
	var fails []slacktest.Failure
	for i := 0; i < 12; i++ {
		fails = append(fails, slacktest.Failure{Status: http.StatusServiceUnavailable})
	}
	fake.Fail("auth.test", fails...)
	env := storetest.NewEnv(t, storetest.Options{})
	a := New(Config{BotToken: "xoxb-test", Mode: ModeEvents, APIURL: fake.APIURL, Attempts: 2,
		Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))}}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	a.sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	fake.WaitCalls(t, "auth.test", 13)
	deadline := time.Now().Add(slacktest.Wait)
	for a.botUser() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil after Slack came back and ctx was cancelled", err)
	}
	if a.botUser() != slacktest.BotUserID {
		t.Errorf("bot user = %q", a.botUser())
	}
}

func TestDefaultPacing(t *testing.T) {
	p := pacing(Config{})
	if key, limit, burst := p.PerChat(route{Channel: "C1"}); key != "C1" || limit != 1 || burst < 1 {
		t.Errorf("default per-channel pacing = %q %v %d, want C1 at 1/s", key, limit, burst)
	}
	if _, limit, _ := pacing(Config{SendPerChannelSecond: 3}).PerChat(route{Channel: "C1"}); limit != 3 {
		t.Errorf("send_per_channel_second 3 gave %v", limit)
	}
	if p := pacing(Config{SendPerChannelSecond: -1}); p.PerChat != nil || p.Global != 0 {
		t.Errorf("a negative limit should lift pacing: %+v", p)
	}
}

// With slack.stream, the answer shows as it is written: posted at the
// first words, updated as more arrive, then updated into the formatted
// answer; one message.
func TestStreamedAnswerUpdatesOneMessage(t *testing.T) {
	h := start(t, options{stream: true})
	h.env.Model.Push(chattest.Step{Chunks: []string{"Hello ", "**there**, ", "friend."}, ChunkDelay: 600 * time.Millisecond})
	h.event(t, "Ev1", slacktest.DM("D1", owner, "hi", "100.1"))

	post := h.fake.WaitCalls(t, "chat.postMessage", 1)[0].Params
	if post["text"] != "Hello …" || post["channel"] != "D1" {
		t.Fatalf("the draft posted is %v", post)
	}
	ts := ""
	h.fake.WaitFor(t, "the final answer", func() bool {
		for _, c := range h.fake.Calls("chat.update") {
			if c.Params["text"] == "Hello *there*, friend." {
				ts = c.Params["ts"]
				return true
			}
		}
		return false
	})
	if text, ok := h.fake.Message("D1", ts); !ok || text != "Hello *there*, friend." {
		t.Fatalf("message %s reads %q (%v), want the formatted answer", ts, text, ok)
	}
	if n := len(h.fake.Calls("chat.postMessage")); n != 1 {
		t.Errorf("%d messages posted, want the one draft", n)
	}
	if n := len(h.fake.Calls("chat.update")); n < 2 {
		t.Errorf("%d updates, want the growing text and the final answer", n)
	}
}
