package telegram

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/store"
	"loadout/store/storetest"
	"loadout/tools"
)

var _ Store = (*store.DB)(nil)

var (
	ana     = telegramtest.User{ID: 42, UserName: "ana", FirstName: "Ana"}
	byName  = telegramtest.User{ID: 55, UserName: "Bea", FirstName: "Bea"}
	mallory = telegramtest.User{ID: 99, UserName: "mallory", FirstName: "Mal"}
)

const group int64 = -100123

type harness struct {
	t      *testing.T
	env    *storetest.Env
	tg     *telegramtest.Server
	logs   *chattest.LogBuffer
	mu     sync.Mutex
	sleeps []time.Duration
}

func newHarness(t *testing.T, o storetest.Options) *harness {
	t.Helper()
	return &harness{t: t, env: storetest.NewEnv(t, o), tg: telegramtest.New(t), logs: &chattest.LogBuffer{}}
}

func (h *harness) config(mut func(*Config)) Config {
	cfg := Config{
		Token:        telegramtest.Token,
		APIEndpoint:  h.tg.Endpoint(),
		AllowedUsers: []string{"42", "@bea"},
		Delivery:     bridge.Delivery{Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		// The platform's send limits are lifted here; TestDefaultPacing
		// checks what they are.
		SendPerSecond: -1, SendPerChatSecond: -1, SendPerGroupMinute: -1,
	}
	if mut != nil {
		mut(&cfg)
	}
	return cfg
}

// start runs an adapter on env; stop cancels it and waits for Run to
// return nil.
func (h *harness) start(env *storetest.Env, cfg Config) (*Adapter, func()) {
	h.t.Helper()
	a := New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	a.sleep = func(ctx context.Context, d time.Duration) error {
		h.mu.Lock()
		h.sleeps = append(h.sleeps, d)
		h.mu.Unlock()
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					h.t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(10 * time.Second):
				h.t.Fatal("Run did not return after cancel")
			}
		})
	}
	h.t.Cleanup(stop)
	return a, stop
}

func (h *harness) slept() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.sleeps...)
}

func (h *harness) modelSaw(text string) bool {
	for _, r := range h.env.Model.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, text) {
				return true
			}
		}
	}
	return false
}

func TestPrivateChatHTMLTypingAndMenu(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("Hi **there**, see [docs](https://example.org/a?b=1&c=2).")
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "hello"})

	sent := h.tg.WaitSent(t, 1)
	want := `Hi <b>there</b>, see <a href="https://example.org/a?b=1&amp;c=2">docs</a>.`
	if sent[0].Text != want || sent[0].ParseMode != "HTML" || sent[0].ChatID != 42 || sent[0].ReplyTo != 0 {
		t.Fatalf("sent %+v, want HTML %q to chat 42", sent[0], want)
	}
	if !h.modelSaw("hello") {
		t.Fatal("the model never saw the message")
	}
	acts := h.tg.Calls("sendChatAction")
	if len(acts) == 0 || acts[0].Params.Get("action") != "typing" || acts[0].Params.Get("chat_id") != "42" {
		t.Fatalf("no typing action before the reply: %+v", acts)
	}
	// The menu is set beside polling, so it may come after the answer.
	h.tg.WaitFor(t, "the command menu", func() bool { return len(h.tg.Calls("setMyCommands")) > 0 })
	menu := h.tg.Calls("setMyCommands")
	if len(menu) != 1 {
		t.Fatalf("setMyCommands called %d times", len(menu))
	}
	for _, c := range []string{"start", "help", "clear", "status"} {
		if !strings.Contains(menu[0].Params.Get("commands"), `"command":"`+c+`"`) {
			t.Errorf("menu %s lacks /%s", menu[0].Params.Get("commands"), c)
		}
	}
}

func TestGroupAnswersOnlyWhenAddressed(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("answer one")
	h.env.Model.Text("answer two")
	h.start(h.env, h.config(nil))
	in := func(text string, reply bool) int {
		return h.tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "supergroup", Text: text, ReplyToBot: reply})
	}
	in("people talking among themselves", false)
	in("@loadout_bot what is the plan", false)
	in("/clear@other_bot", false)
	in("/status@loadout_bot", false)
	in("and then?", true)
	last := in("/start", false)

	sent := h.tg.WaitSent(t, 4)
	h.tg.WaitFor(t, "offset confirmed", func() bool { return h.tg.Confirmed(last) })
	if len(sent) != 4 {
		t.Fatalf("sent %d messages, want 4: %+v", len(sent), sent)
	}
	// /status is answered at once, beside the chat's queue, when it
	// comes while the first turn runs (bridge TestStatusAnswersWhileATurnRuns):
	// its reply may come before that turn's answer. The rest keep their order.
	var queued []string
	status := 0
	for _, s := range sent {
		if strings.Contains(s.Text, "Messages:") {
			status++
			continue
		}
		queued = append(queued, s.Text)
	}
	if status != 1 || len(queued) != 3 || queued[0] != "answer one" || queued[1] != "answer two" || !strings.Contains(queued[2], "Hi, I") {
		t.Fatalf("unexpected replies: %+v", sent)
	}
	for _, s := range sent {
		if s.ChatID != group || s.ReplyTo == 0 {
			t.Errorf("reply %+v not threaded to the group message", s)
		}
	}
	if n := len(h.env.Model.Requests()); n != 2 {
		t.Fatalf("model called %d times, want 2", n)
	}
	if h.modelSaw("among themselves") || h.modelSaw("@loadout_bot") {
		t.Fatal("the model saw an unaddressed message or the raw mention")
	}
	if !h.modelSaw("what is the plan") {
		t.Fatal("the model did not see the mention's text")
	}
}

func TestForumTopicHasItsOwnSession(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("in the topic")
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "supergroup", ThreadID: 7, Topic: true, Text: "@loadout_bot hi"})
	sent := h.tg.WaitSent(t, 1)
	if sent[0].ThreadID != 7 || sent[0].Text != "in the topic" {
		t.Fatalf("sent %+v, want a reply in thread 7", sent[0])
	}
	var n int64
	h.env.Store.Gorm().Raw("SELECT count(*) FROM sessions WHERE chat_key = ?", fmt.Sprintf("telegram:%d:7", group)).Scan(&n)
	if n != 1 {
		t.Fatalf("sessions for the topic = %d, want 1", n)
	}
}

func TestAllowlistRefusesOnceAndKeepsStrangersOut(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("hello Bea")
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: mallory, ChatID: group, ChatType: "group", Text: "@loadout_bot secret plan one"})
	h.tg.Push(telegramtest.Message{From: mallory, ChatID: group, ChatType: "group", Text: "@loadout_bot secret plan two"})
	h.tg.Push(telegramtest.Message{From: byName, ChatID: group, ChatType: "group", Text: "@loadout_bot hi"})

	sent := h.tg.WaitSent(t, 2)
	if len(sent) != 2 || sent[0].Text != bridge.TextRefused || sent[1].Text != "hello Bea" {
		t.Fatalf("sent %+v, want one refusal then the answer", sent)
	}
	if h.modelSaw("secret plan") {
		t.Fatal("a stranger's message reached the model")
	}
	var n int64
	h.env.Store.Gorm().Raw("SELECT count(*) FROM messages WHERE text LIKE '%secret plan%'").Scan(&n)
	var m int64
	h.env.Store.Gorm().Raw("SELECT count(*) FROM inbox_items WHERE text LIKE '%secret plan%'").Scan(&m)
	if n+m != 0 {
		t.Fatalf("a stranger's message was stored (%d history, %d inbox)", n, m)
	}
	logs := h.logs.String()
	for _, want := range []string{"user_id=99", "username=@mallory", "telegram.allowed_users"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

func TestEmptyAllowlistServesNobody(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.start(h.env, h.config(func(c *Config) { c.AllowedUsers = nil }))
	h.tg.Push(telegramtest.Message{From: ana, Text: "hello"})
	sent := h.tg.WaitSent(t, 1)
	if sent[0].Text != bridge.TextRefused {
		t.Fatalf("sent %q, want the refusal", sent[0].Text)
	}
	if n := len(h.env.Model.Requests()); n != 0 {
		t.Fatalf("model called %d times", n)
	}
}

func TestRejectedFormattingIsSentPlain(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("**bold** and `code`")
	h.tg.FailNext("sendMessage", 400, "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0", 0)
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "format please"})
	sent := h.tg.WaitSent(t, 1)
	if sent[0].ParseMode != "" || sent[0].Text != "**bold** and `code`" {
		t.Fatalf("sent %+v, want the same text plain", sent[0])
	}
	if n := len(h.tg.Calls("sendMessage")); n != 2 {
		t.Fatalf("sendMessage called %d times, want 2 (HTML, then plain)", n)
	}
}

func TestLongReplyIsSplitInOrder(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	var b strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "Paragraph %d with **bold** words and <angle> & ampersands, repeated to take room. %s\n\n", i, strings.Repeat("filler ", 12))
	}
	b.WriteString("```go\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "fmt.Println(%d) // x < y && y > z\n", i)
	}
	b.WriteString("```\n\nThe end.")
	h.env.Model.Text(b.String())
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "write a lot"})

	h.tg.WaitFor(t, "the last chunk", func() bool {
		s := h.tg.Sent()
		return len(s) > 0 && strings.HasSuffix(s[len(s)-1].Text, "The end.")
	})
	sent := h.tg.Sent()
	if len(sent) < 3 {
		t.Fatalf("sent %d messages, want at least 3", len(sent))
	}
	var all strings.Builder
	for i, s := range sent {
		if s.ParseMode != "HTML" {
			t.Fatalf("chunk %d sent without HTML (formatting was rejected?)", i)
		}
		visible, err := telegramtest.CheckHTML(s.Text)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if strings.Count(s.Text, "<pre") != strings.Count(s.Text, "</pre>") {
			t.Fatalf("chunk %d has an unbalanced code block", i)
		}
		all.WriteString(visible + "\n")
	}
	text := all.String()
	prev := -1
	for _, want := range []string{"Paragraph 0 ", "Paragraph 39 ", "fmt.Println(0)", "fmt.Println(150) // x < y && y > z", "fmt.Println(299)", "The end."} {
		i := strings.Index(text, want)
		if i < 0 || i < prev {
			t.Fatalf("%q missing or out of order", want)
		}
		prev = i
	}
}

func TestTypingIsRenewedUntilTheReply(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("done thinking")
	h.tg.Pause("sendMessage")
	h.start(h.env, h.config(func(c *Config) { c.TypingInterval = 5 * time.Millisecond }))
	h.tg.Push(telegramtest.Message{From: ana, Text: "think hard"})
	h.tg.WaitFor(t, "reply held and typing renewed", func() bool {
		return h.tg.Waiting("sendMessage") == 1 && len(h.tg.Calls("sendChatAction")) >= 3
	})
	if len(h.tg.Sent()) != 0 {
		t.Fatal("reply sent while held")
	}
	h.tg.Resume("sendMessage")
	if s := h.tg.WaitSent(t, 1); s[0].Text != "done thinking" {
		t.Fatalf("sent %q", s[0].Text)
	}
}

func TestRateLimitWaitsRetryAfter(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("eventually")
	h.tg.FailNext("sendMessage", 429, "Too Many Requests: retry after 3", 3)
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "hi"})
	sent := h.tg.WaitSent(t, 1)
	if len(sent) != 1 || sent[0].Text != "eventually" {
		t.Fatalf("sent %+v", sent)
	}
	found := false
	for _, d := range h.slept() {
		found = found || d == 3*time.Second
	}
	if !found {
		t.Fatalf("did not wait retry_after: slept %v", h.slept())
	}
}

func TestPollingSurvivesErrorsAndOptionalFailures(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("still here")
	h.tg.FailNext("getMe", 502, "Bad Gateway", 0)
	h.tg.FailNext("setMyCommands", 404, "Not Found", 0)
	h.tg.FailNext("getUpdates", 502, "Bad Gateway", 0)
	h.tg.FailNext("getUpdates", 500, "Internal Server Error", 0)
	h.tg.FailNext("sendChatAction", 404, "Not Found", 0)
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "anyone?"})
	if s := h.tg.WaitSent(t, 1); s[0].Text != "still here" {
		t.Fatalf("sent %q", s[0].Text)
	}
	if len(h.slept()) < 3 {
		t.Fatalf("expected backoff waits, got %v", h.slept())
	}
	// The command menu is set beside polling, so its failure may be
	// logged after the answer went out.
	chattest.Eventually(t, "the failed optional call to be logged", func() bool { return strings.Contains(h.logs.String(), "setMyCommands") })
}

// Polling asks for updates at once: it removes a webhook only when one is
// in the way, instead of spending a round trip on deleteWebhook at every
// start.
func TestPollingStartsWithoutRemovingAWebhookThatIsNotThere(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("hello")
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "hi"})
	h.tg.WaitSent(t, 1)
	if n := len(h.tg.Calls("deleteWebhook")); n != 0 {
		t.Fatalf("deleteWebhook called %d times with no webhook set", n)
	}
}

// A webhook left by an earlier run in webhook mode makes getUpdates
// conflict; polling removes it (trying again when that fails) and then
// takes the updates.
func TestPollingRemovesAWebhookLeftBehind(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("polling now")
	h.tg.SetWebhook("https://old.example.com/telegram")
	h.tg.FailNext("deleteWebhook", 502, "Bad Gateway", 0)
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "are you there?"})
	if s := h.tg.WaitSent(t, 1); s[0].Text != "polling now" {
		t.Fatalf("sent %q", s[0].Text)
	}
	if n := len(h.tg.Calls("deleteWebhook")); n != 2 {
		t.Fatalf("deleteWebhook called %d times, want 2 (one failed)", n)
	}
	if strings.Contains(h.logs.String(), "another running instance") {
		t.Fatalf("a webhook in the way was reported as another instance:\n%s", h.logs.String())
	}
	chattest.Eventually(t, "the webhook's removal to be logged", func() bool { return strings.Contains(h.logs.String(), "removed the webhook") })
}

func TestRestartSendsStoredReplyExactlyOnce(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("first answer")
	h.tg.Pause("sendMessage")
	_, stop := h.start(h.env, h.config(func(c *Config) { c.ShutdownGrace = time.Nanosecond }))
	h.tg.Push(telegramtest.Message{From: ana, Text: "question one"})
	h.tg.WaitFor(t, "the reply to be on its way", func() bool { return h.tg.Waiting("sendMessage") == 1 })
	stop() // crash: the inbox entry is written, the reply not sent
	// The abandoned request must be over before the server may answer.
	h.tg.WaitFor(t, "the abandoned send to end", func() bool { return h.tg.Waiting("sendMessage") == 0 })
	h.tg.Resume("sendMessage")
	if n := len(h.tg.Sent()); n != 0 {
		t.Fatalf("%d messages sent before the restart", n)
	}

	h.restart()
	h.env.Model.Text("second answer")
	last := h.tg.Push(telegramtest.Message{From: ana, Text: "question two"})
	sent := h.tg.WaitSent(t, 2)
	h.tg.WaitFor(t, "offset confirmed", func() bool { return h.tg.Confirmed(last) })
	if len(sent) != 2 || sent[0].Text != "first answer" || sent[1].Text != "second answer" {
		t.Fatalf("sent %+v, want each answer once, in order", sent)
	}
	if n := len(h.env.Model.Requests()); n != 2 {
		t.Fatalf("model called %d times, want 2 (the stored answer is not recomputed)", n)
	}
}

func TestWebhookChecksSecretAndDedupes(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("via webhook")
	h.env.Model.Text("second via webhook")
	a, _ := h.start(h.env, h.config(func(c *Config) {
		c.Mode = ModeWebhook
		c.WebhookURL = "https://bot.example.org/telegram/hook"
		c.WebhookSecret = "s3cret"
	}))
	if a.WebhookPath() != "/telegram/hook" {
		t.Fatalf("WebhookPath = %q", a.WebhookPath())
	}
	h.tg.WaitFor(t, "setWebhook", func() bool { return len(h.tg.Calls("setWebhook")) == 1 })
	set := h.tg.Calls("setWebhook")[0].Params
	if set.Get("url") != "https://bot.example.org/telegram/hook" || set.Get("secret_token") != "s3cret" {
		t.Fatalf("setWebhook params %v", set)
	}
	if len(h.tg.Calls("getUpdates")) != 0 {
		t.Fatal("webhook mode polled getUpdates")
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	post := func(secret string, body []byte) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	_, forged := h.tg.Update(telegramtest.Message{From: ana, Text: "forged one"})
	if c := post("", forged); c != http.StatusUnauthorized {
		t.Fatalf("no secret: status %d", c)
	}
	if c := post("wrong", forged); c != http.StatusUnauthorized {
		t.Fatalf("wrong secret: status %d", c)
	}
	_, real := h.tg.Update(telegramtest.Message{From: ana, Text: "real one"})
	for i := 0; i < 2; i++ { // Telegram may deliver an update twice
		if c := post("s3cret", real); c != http.StatusOK {
			t.Fatalf("good secret: status %d", c)
		}
	}
	_, next := h.tg.Update(telegramtest.Message{From: ana, Text: "next one"})
	if c := post("s3cret", next); c != http.StatusOK {
		t.Fatalf("good secret: status %d", c)
	}
	sent := h.tg.WaitSent(t, 2)
	if len(sent) != 2 || sent[0].Text != "via webhook" || sent[1].Text != "second via webhook" {
		t.Fatalf("sent %+v", sent)
	}
	if h.modelSaw("forged") {
		t.Fatal("a rejected request reached the model")
	}
}

type noteInput struct {
	Text string `json:"text" desc:"the note"`
}

func TestFullTurnLoadsGroupAndCallsTool(t *testing.T) {
	var mu sync.Mutex
	var got []string
	h := newHarness(t, storetest.Options{Register: func(r *tools.Registry) error {
		return r.AddGroup(tools.Group{Name: "notes", DisplayName: "Notes", Description: "Keep notes."},
			tools.New(tools.Definition{Name: "add_note", Description: "Add a note."}, func(ctx context.Context, in noteInput) (any, error) {
				c := tools.CallerFrom(ctx)
				mu.Lock()
				got = append(got, in.Text+"|"+c.ChatKey+"|"+c.UserKey)
				mu.Unlock()
				return map[string]string{"status": "saved"}, nil
			}))
	}})
	h.env.Model.Call("load_tool_group", `{"group_name":"notes"}`)
	h.env.Model.Call("add_note", `{"text":"buy milk"}`)
	h.env.Model.Text("Saved: **buy milk**")
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Text: "note that I need to buy milk"})

	sent := h.tg.WaitSent(t, 1)
	if sent[0].Text != "Saved: <b>buy milk</b>" || sent[0].ParseMode != "HTML" {
		t.Fatalf("sent %+v", sent[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "buy milk|telegram:42|telegram:42" {
		t.Fatalf("tool calls %v", got)
	}
	reqs := h.env.Model.Requests()
	if len(reqs) != 3 || !strings.Contains(strings.Join(chattest.ToolNames(reqs[1]), ","), "add_note") {
		t.Fatalf("add_note was not offered after loading the group")
	}
	if strings.Contains(strings.Join(chattest.ToolNames(reqs[0]), ","), "add_note") {
		t.Fatal("add_note was offered before the group was loaded")
	}
}

func TestRejectedTokenStopsRun(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	a := New(h.config(func(c *Config) { c.Token = "999:wrong" }), bridge.NewRouter(h.env.Engine, "loadout"), h.env.Store)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "telegram.token") {
		t.Fatalf("Run = %v, want an error naming telegram.token", err)
	}
}

func TestDefaultPacing(t *testing.T) {
	p := pacing(Config{})
	if p.Global != 30 {
		t.Errorf("global pacing = %v/s, want 30", p.Global)
	}
	if key, limit, _ := p.PerChat(routeInfo{ChatID: 42}); key != "42" || limit != 1 {
		t.Errorf("private chat pacing = %q %v, want 42 at 1/s", key, limit)
	}
	if _, limit, _ := p.PerChat(routeInfo{ChatID: -1001}); math.Abs(float64(limit)-20.0/60) > 1e-9 {
		t.Errorf("group pacing = %v/s, want 20 a minute", limit)
	}
	lifted := pacing(Config{SendPerSecond: -1, SendPerChatSecond: -1, SendPerGroupMinute: -1})
	if _, limit, _ := lifted.PerChat(routeInfo{ChatID: 42}); limit != 0 || lifted.Global != 0 {
		t.Errorf("negative limits should lift pacing: global %v, chat %v", lifted.Global, limit)
	}
}

// With telegram.stream, the answer shows as it is written: one message,
// posted at the first words and edited as more arrive, then edited into
// the formatted answer; a long answer's other parts follow as messages.
func TestStreamedAnswerEditsOneMessage(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	long := strings.Repeat("more words here ", 400) // over one message
	h.env.Model.Push(chattest.Step{Chunks: []string{"Hello ", "**there** ", "friend. ", long, "The end."}, ChunkDelay: 400 * time.Millisecond})
	h.start(h.env, h.config(func(c *Config) { c.Stream = true }))
	h.tg.Push(telegramtest.Message{From: ana, Text: "hello"})

	first := h.tg.WaitSent(t, 1)[0]
	if first.ParseMode != "" || !strings.HasPrefix(first.Text, "Hello") || !strings.HasSuffix(first.Text, " …") {
		t.Fatalf("the first draft is %+v, want the first words, plain, marked unfinished", first)
	}
	h.tg.WaitFor(t, "the last part", func() bool {
		s := h.tg.Sent()
		return strings.HasSuffix(s[len(s)-1].Text, "The end.")
	})
	sent := h.tg.Sent()
	if len(sent) < 2 {
		t.Fatalf("sent %d messages", len(sent))
	}
	if sent[0].MessageID != first.MessageID || sent[0].ParseMode != "HTML" || !strings.HasPrefix(sent[0].Text, "Hello <b>there</b> friend.") {
		t.Fatalf("the draft became %+v, want the formatted first part", sent[0])
	}
	if sent[0].Edits < 2 {
		t.Errorf("the draft was edited %d times, want the growing text and the final part", sent[0].Edits)
	}
	for i, s := range sent {
		if strings.HasSuffix(s.Text, " …") {
			t.Errorf("message %d is left as a draft: %.80q", i, s.Text)
		}
	}
	// A part a second at most in one chat, drafts included: no edit may
	// break the limit, so the number of edits is bounded by the time.
	if n := len(h.tg.Calls("editMessageText")); n > 12 {
		t.Errorf("%d edits for a stream of about a second", n)
	}
}
