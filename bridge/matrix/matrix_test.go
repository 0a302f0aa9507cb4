package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"loadout/bridge"
	"loadout/bridge/matrix/matrixtest"
	"loadout/config"
	"loadout/logs"
	"loadout/store/storetest"
	"loadout/tools"
)

// newBot is a world and a bot answering in it from a fresh database.
func newBot(t *testing.T, encrypted bool, o storetest.Options) (*world, *storetest.Env, *Adapter) {
	w := newWorld(t, encrypted)
	env := storetest.NewEnv(t, o)
	a, _ := w.start(t, env, w.config(bridge.Delivery{}))
	return w, env, a
}

// waitTexts waits until person i's room in w holds n messages from the
// bot, and returns them.
func waitTexts(t *testing.T, p *matrixtest.Person, room id.RoomID, bot id.UserID, n int) []string {
	t.Helper()
	var got []string
	matrixtest.Eventually(t, "the bot's answers", func() bool {
		got = p.Texts(room, bot)
		return len(got) >= n
	})
	return got
}

// In a room of several people the bot answers a message that mentions
// it, in a thread of that message: the thread is a chat of its own, and
// a later mention in the thread belongs to it. Messages without a
// mention are not answered; a stranger's mention is refused once.
func TestMentionsInARoomAreAnsweredInTheirThread(t *testing.T) {
	w, env, _ := newBot(t, false, storetest.Options{})
	ana, bea := w.people[0], w.people[1]
	eve := w.hs.Person(t, "eve", false)
	room := ana.Room(t, false, w.bot, bea.ID(), eve.ID())
	for _, p := range []*matrixtest.Person{bea, eve} {
		if _, err := p.Client.JoinRoomByID(context.Background(), room); err != nil {
			t.Fatal(err)
		}
	}
	ana.WaitJoined(t, room, w.bot)
	ana.WaitJoined(t, room, eve.ID())
	env.Model.Text("hello from the thread")
	env.Model.Text("still the thread")

	ana.Say(t, room, &event.MessageEventContent{MsgType: event.MsgText, Body: "just chatting"})
	eve.Say(t, room, &event.MessageEventContent{MsgType: event.MsgText, Body: string(w.bot) + ": let me in"})
	root := ana.Say(t, room, &event.MessageEventContent{MsgType: event.MsgText, Body: "loadout: what time is it?",
		Mentions: &event.Mentions{UserIDs: []id.UserID{w.bot}}})
	got := waitTexts(t, ana, room, w.bot, 2)
	if !slices.Contains(got, bridge.TextRefused) || !slices.Contains(got, "hello from the thread") {
		t.Fatalf("answers %q", got)
	}
	var threaded bool
	for _, e := range ana.Events(room) {
		if m := e.Content.AsMessage(); e.Sender == w.bot && m.Body == "hello from the thread" {
			threaded = m.RelatesTo.GetThreadParent() == root
		}
	}
	if !threaded {
		t.Fatal("the answer is not in the mention's thread")
	}
	if last := env.Model.Last(t).Messages; last[len(last)-1].Content != "what time is it?" {
		t.Fatalf("the model read %q", last[len(last)-1].Content)
	}
	rel := (&event.RelatesTo{}).SetThread(root, root)
	ana.Say(t, room, &event.MessageEventContent{MsgType: event.MsgText, Body: "@loadout:localhost and now?", RelatesTo: rel,
		Mentions: &event.Mentions{UserIDs: []id.UserID{w.bot}}})
	waitTexts(t, ana, room, w.bot, 3)
	reqs := env.Model.Requests()
	if n := len(reqs[1].Messages); n < 3 || !strings.Contains(reqs[1].Messages[n-3].Content, "what time is it?") {
		t.Fatalf("the thread's second message did not continue its session: %+v", reqs[1].Messages)
	}
	var key string
	env.Store.Gorm().Raw("SELECT chat_key FROM inbox_items WHERE event_id = ?", "event:"+string(root)).Scan(&key)
	if key != chatKey(room, root) {
		t.Fatalf("chat key %q", key)
	}
	if n := len(env.Model.Requests()); n != 2 {
		t.Fatalf("%d turns, want 2", n)
	}
}

// An invite from someone not allowed is rejected; an allowed person's
// is taken.
func TestInvitesFromStrangersAreRejected(t *testing.T) {
	w, _, _ := newBot(t, false, storetest.Options{})
	eve := w.hs.Person(t, "eve", false)
	room := eve.Room(t, false, w.bot)
	matrixtest.Eventually(t, "the invite rejected", func() bool {
		return eve.Client.StateStore.IsMembership(context.Background(), room, w.bot, event.MembershipLeave)
	})
	ok := w.people[0].Room(t, false, w.bot)
	w.people[0].WaitJoined(t, ok, w.bot)
}

// purge is a destructive tool that counts its runs.
func purge(runs *atomic.Int32) func(*tools.Registry) error {
	return func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}
}

// waitQuestion waits for the bot's question in room, with its two reactions
// under it, and returns its event.
func waitQuestion(t *testing.T, p *matrixtest.Person, room id.RoomID, bot id.UserID) id.EventID {
	t.Helper()
	var q id.EventID
	matrixtest.Eventually(t, "the bot's reactions under the question", func() bool {
		n := 0
		for _, e := range p.Events(room) {
			if m := e.Content.AsMessage(); e.Sender == bot && e.Type == event.EventMessage && strings.Contains(m.Body, "/approve") {
				q = e.ID
			}
			if r := e.Content.AsReaction(); e.Type == event.EventReaction && e.Sender == bot && r.RelatesTo.EventID == q {
				n++
			}
		}
		return n == 2
	})
	return q
}

// Only the person asked answers a question with a reaction: anyone
// else's ✅ does nothing, and the asker's ❌ denies it.
func TestOnlyTheAskerAnswersWithAReaction(t *testing.T) {
	var runs atomic.Int32
	w, env, _ := newBot(t, false, storetest.Options{Register: purge(&runs)})
	ana, bea := w.people[0], w.people[1]
	room := ana.Room(t, false, w.bot, bea.ID())
	bea.Client.JoinRoomByID(context.Background(), room)
	ana.WaitJoined(t, room, w.bot)
	ana.WaitJoined(t, room, bea.ID())
	env.Model.Call("purge_archive", `{}`)
	ana.Say(t, room, &event.MessageEventContent{MsgType: event.MsgText, Body: "loadout: purge it", Mentions: &event.Mentions{UserIDs: []id.UserID{w.bot}}})
	got := waitTexts(t, ana, room, w.bot, 1)
	if !regexp.MustCompile(`Request #\S+`).MatchString(got[0]) {
		t.Fatalf("the question names no code: %q", got[0])
	}
	q := waitQuestion(t, ana, room, w.bot)
	if _, err := bea.Client.SendReaction(context.Background(), room, q, reactApprove+"\ufe0f"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a sync or two
	if runs.Load() != 0 || len(env.Model.Requests()) != 1 {
		t.Fatalf("someone else's reaction ran the call (%d runs, %d turns)", runs.Load(), len(env.Model.Requests()))
	}
	env.Model.Text("Kept it.")
	if _, err := ana.Client.SendReaction(context.Background(), room, q, reactDeny); err != nil {
		t.Fatal(err)
	}
	got = waitTexts(t, ana, room, w.bot, 2)
	if runs.Load() != 0 {
		t.Fatalf("denied, yet ran: %q", got)
	}
	matrixtest.Eventually(t, "the question to say what was chosen", func() bool {
		got = ana.Texts(room, w.bot)
		return strings.HasSuffix(got[0], "You chose: Deny.")
	})
}

// The channel judges a reaction itself, by the person the question was
// asked of, before it asks the engine: a reaction by anyone else does
// nothing, even where the engine would let them answer (here a request
// of Bea's whose question is kept as asked of Ana).
func TestAReactionCountsOnlyForThePersonAsked(t *testing.T) {
	var runs atomic.Int32
	w, env, _ := newBot(t, false, storetest.Options{Register: purge(&runs)})
	ana, bea := w.people[0], w.people[1]
	room := w.rooms[1] // Bea's direct chat with the bot
	env.Model.Call("purge_archive", `{}`)
	bea.Say(t, room, &event.MessageEventContent{MsgType: event.MsgText, Body: "purge it"})
	q := waitQuestion(t, bea, room, w.bot)
	ctx := context.Background()
	raw, err := env.Store.State(ctx, stateAskPrefix+string(q))
	var kept question
	if err == nil {
		err = json.Unmarshal([]byte(raw), &kept)
	}
	if err != nil || kept.User != bea.ID() {
		t.Fatalf("the kept question %q, %v", raw, err)
	}
	kept.User = ana.ID()
	b, _ := json.Marshal(kept)
	if err := env.Store.SetState(ctx, stateAskPrefix+string(q), string(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := bea.Client.SendReaction(ctx, room, q, reactApprove); err != nil {
		t.Fatal(err)
	}
	matrixtest.Eventually(t, "the reaction taken or refused", func() bool {
		return runs.Load() > 0 || strings.Contains(w.logs.String(), "ignored a reaction to a question by someone other than the person asked")
	})
	time.Sleep(time.Second)
	if runs.Load() != 0 || len(env.Model.Requests()) != 1 || len(bea.Texts(room, w.bot)) != 1 {
		t.Fatalf("a reaction by someone other than the person asked decided: %d runs, %d turns, %q", runs.Load(), len(env.Model.Requests()), bea.Texts(room, w.bot))
	}
}

// Answers are sent as Markdown rendered to HTML, with the Markdown as
// the plain body.
func TestAnswersAreFormatted(t *testing.T) {
	c := content(route{Room: "!r:x"}, "**bold** and `code`")
	if c.Format != event.FormatHTML || !strings.Contains(c.FormattedBody, "<strong>bold</strong>") || !strings.Contains(c.FormattedBody, "<code>code</code>") {
		t.Fatalf("formatted %q (%s)", c.FormattedBody, c.Format)
	}
	if c.Body != "**bold** and `code`" {
		t.Fatalf("body %q", c.Body)
	}
	if p := content(route{Room: "!r:x"}, "plain"); p.Format != "" || p.FormattedBody != "" {
		t.Fatalf("plain text formatted: %+v", p)
	}
}

// The access token, the password and the pickle key never reach a log
// line: the values the section declares are redacted by the logger, and
// tokens have the shapes it declares, for text that holds one it was
// not given.
func TestSecretsAreRedacted(t *testing.T) {
	k := Kind()
	cfg := Config{AccessToken: "syt_bG9hZG91dA_abcdefghijklmnopqrst_0a1b2c", Password: "correct horse battery", PickleKey: botPickleKey}
	var buf bytes.Buffer
	log := logs.New(&buf, "info", "text", config.Secrets(cfg, nil), k.Shapes())
	log.Info("calling", "url", "https://hs/_matrix/client/v3/sync?since=s1", "token", cfg.AccessToken, "pw", "the password is "+cfg.Password,
		"key", "sealed with "+cfg.PickleKey)
	line := buf.String()
	for _, s := range []string{cfg.AccessToken, cfg.Password, cfg.PickleKey} {
		if strings.Contains(line, s) {
			t.Fatalf("%q reached the log: %s", s, line)
		}
	}
	shapes := regexp.MustCompile(strings.Join(k.Shapes(), "|"))
	for _, s := range []string{
		"sent with syt_b3RoZXI_zyxwvutsrqponmlkjihg_9z8y7x here",
		"token Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGw, then", // Dendrite's
	} {
		if !shapes.MatchString(s) {
			t.Fatalf("no shape matches the token in %q", s)
		}
	}
	for _, s := range []string{"@loadout:example.org !abcDEF:example.org", "$Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGw",
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"} {
		if shapes.MatchString(s) {
			t.Fatalf("a shape matches %q, which is no token", s)
		}
	}
}

// Dendrite's tokens have the shape the channel declares.
func TestDendriteTokensHaveTheDeclaredShape(t *testing.T) {
	w := newWorld(t, false)
	shapes := regexp.MustCompile(`^(?:` + strings.Join(TokenShapes(), "|") + `)$`)
	tok := w.people[0].Client.AccessToken
	if !shapes.MatchString(tok) {
		t.Fatalf("Dendrite's token %q matches no shape", tok)
	}
}

// A token the homeserver refuses stops the start with a message naming
// matrix.access_token.
func TestInvalidTokenStopsTheStart(t *testing.T) {
	w := newWorld(t, false)
	env := storetest.NewEnv(t, storetest.Options{})
	cfg := w.config(bridge.Delivery{})
	cfg.Password, cfg.AccessToken = "", "syt_bm90aGluZw_notatokenatall_000000"
	sqlDB, _ := env.Store.Gorm().DB()
	a, err := New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store, bridge.SQL{DB: sqlDB, Dialect: "sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "matrix.access_token") {
		t.Fatalf("Run = %v, want an error naming matrix.access_token", err)
	}
}

// errTransport fails every request, counting them.
type errTransport struct{ n atomic.Int32 }

func (e *errTransport) RoundTrip(*http.Request) (*http.Response, error) {
	e.n.Add(1)
	return nil, errors.New("no network in this test")
}

// Build connects to nothing: Run does. A section the checker refuses
// names its keys.
func TestBuildDoesNoIO(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	sqlDB, _ := env.Store.Gorm().DB()
	tr := &errTransport{}
	cfg := Config{Enabled: true, HomeserverURL: "https://matrix.example.org", UserID: "@loadout:example.org", AccessToken: "syt_x_y_z"}
	k := Kind()
	if !k.Enabled(cfg) || k.Describe(cfg) != "matrix (@loadout:example.org)" {
		t.Fatalf("enabled %v, described %q", k.Enabled(cfg), k.Describe(cfg))
	}
	ch, err := k.Build(context.Background(), cfg, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store,
		Delivery: bridge.Delivery{HTTPClient: &http.Client{Transport: tr}}, SQL: &bridge.SQL{DB: sqlDB, Dialect: "sqlite"}})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Name() != "matrix" || tr.n.Load() != 0 {
		t.Fatalf("built %q with %d requests", ch.Name(), tr.n.Load())
	}
	if _, err := k.Build(context.Background(), cfg, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store}); err == nil {
		t.Fatal("built without a database")
	}
	var c config.Checker
	c.Section = "matrix"
	Config{Enabled: true, UserID: "loadout", AllowedUsers: []string{"ana"}}.Check(&c)
	all := errors.Join(c.Errors()...).Error()
	for _, key := range []string{"matrix.homeserver_url", "matrix.user_id", "matrix.access_token", "matrix.allowed_users"} {
		if !strings.Contains(all, key) {
			t.Fatalf("the check does not name %s: %s", key, all)
		}
	}
}

// Chat keys name a room, or a thread of it, and come back as routes.
func TestChatKeysAndRoutes(t *testing.T) {
	for _, c := range []struct {
		room   id.RoomID
		thread id.EventID
	}{{"!abc:example.org", ""}, {"!abc:example.org", "$ev/ent:x"}} {
		r, err := routeOf(chatKey(c.room, c.thread))
		if err != nil || r.Room != c.room || r.Thread != c.thread {
			t.Fatalf("%v: %+v, %v", c, r, err)
		}
	}
	for _, bad := range []string{"telegram:1", "matrix:", "matrix:abc"} {
		if _, err := routeOf(bad); err == nil {
			t.Fatalf("%q read as a Matrix chat", bad)
		}
	}
}

// An encrypted message whose keys have not reached the bot is kept,
// across a restart, and answered when they arrive; one whose keys never
// come is answered, once, that it could not be read.
func TestUndecryptableMessagesWaitForTheirKeys(t *testing.T) {
	if !matrixtest.Encryption() {
		t.Skip("end-to-end encryption needs the goolm build tag (go test -tags sqlite_fts5,goolm)")
	}
	w := newWorld(t, true)
	env := storetest.NewEnv(t, storetest.Options{})
	cfg := w.config(bridge.Delivery{})
	cfg.KeyWait = time.Hour
	_, stop := w.start(t, env, cfg)
	ana, room := w.people[0], w.rooms[0]
	env.Model.Text("now I can read it")
	ev := ana.SayWithheld(t, room, "a secret question")
	matrixtest.Eventually(t, "the message kept", func() bool {
		raw, _ := env.Store.State(context.Background(), stateKept)
		return strings.Contains(raw, string(ev))
	})
	// Kept across a restart.
	stop()
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: env.DBPath, Model: env.Model})
	_, stop2 := w.start(t, env2, cfg)
	if n := len(env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns before the keys came", n)
	}
	ana.ShareSession(t, room, w.bot)
	got := waitTexts(t, ana, room, w.bot, 1)
	if got[0] != "now I can read it" {
		t.Fatalf("answers %q", got)
	}
	if last := env.Model.Last(t).Messages; last[len(last)-1].Content != "a secret question" {
		t.Fatalf("the model read %q", last[len(last)-1].Content)
	}
	raw, _ := env2.Store.State(context.Background(), stateKept)
	if strings.Contains(raw, string(ev)) {
		t.Fatal("still kept after it was answered")
	}

	// Keys that never come: the person is told, once for each message.
	stop2()
	cfg.KeyWait = 2 * time.Second
	env3 := storetest.NewEnv(t, storetest.Options{DBPath: env.DBPath, Model: env.Model})
	w.start(t, env3, cfg)
	bea, broom := w.people[1], w.rooms[1]
	bea.KeepKeys(true)
	bea.Say(t, broom, &event.MessageEventContent{MsgType: event.MsgText, Body: "never readable"})
	got = waitTexts(t, bea, broom, w.bot, 1)
	time.Sleep(5 * time.Second) // more syncs
	got = bea.Texts(broom, w.bot)
	if len(got) != 1 || got[0] != TextUndecryptable {
		t.Fatalf("answers %q, want one %q", got, TextUndecryptable)
	}
	if n := len(env.Model.Requests()); n != 1 {
		t.Fatalf("%d turns", n)
	}
	raw, _ = env3.Store.State(context.Background(), stateKept)
	if raw != "[]" && raw != "" && raw != "null" {
		t.Fatalf("still kept: %s", raw)
	}
}

// HTML the model writes (led on by a page it read) is not passed on as
// the message's formatting: a person's client never renders a script,
// an image that calls home or a fake link the model typed as markup.
func TestModelHTMLIsNotPassedOn(t *testing.T) {
	c := content(route{Room: "!r:x"}, `see <img src="https://collect.evil.example/p.png"> and <a href="https://evil.example">your bank</a>`)
	if strings.Contains(c.FormattedBody, "<img") || strings.Contains(c.FormattedBody, "<a href") {
		t.Fatalf("raw HTML passed on: %q", c.FormattedBody)
	}
}
