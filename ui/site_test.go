package ui_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/console"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/google"
	"loadout/google/googletest"
	"loadout/store"
	"loadout/store/storetest"
	"loadout/tools"
	"loadout/tools/schedule"
	"loadout/ui"
)

// adminToken is the operator's token of the test sites.
const adminToken = "operator-token-0123456789"

// me is the person of the console chat; other is someone else, with
// things of their own.
const (
	me    = "console:local"
	other = "telegram:99"
	// group is a chat of both; otherMail a result personal to other there.
	group     = "telegram:-100"
	otherMail = "From the bank: your PIN is 4321"
)

// site is a running loadout with the console on a real store and a real
// channel (the terminal console, over pipes): what a browser meets.
type site struct {
	URL     string
	Env     *storetest.Env
	Store   *store.DB
	Console *ui.Console
	Logs    *chattest.LogBuffer
	Out     *syncBuffer
	Router  *bridge.Router
	// Runs counts the runs of the destructive tool the approval holds.
	Runs *atomic.Int32
	// Clock moves the console's time.
	Clock *clock
	// Google holds me's connected account.
	Google *google.Accounts
	// Roster decides whom the channels let in.
	Roster *roster
	// Approval is the pending approval of me; TaskMine and TaskOther are
	// tasks of me and of other; Event the quarantined event.
	Approval            chat.Approval
	TaskMine, TaskOther schedule.Task
	Event               ui.Event
}

// roster is the site's running channels: its hub, with whom their
// allow-lists let in decided by the test (how a channel decides is
// tested with each channel, and end to end in cmd/loadout): everyone
// until Remove takes them off.
type roster struct {
	*bridge.Hub
	mu      sync.Mutex
	removed map[string]bool
	// unsure: the channel cannot tell now (its platform is down).
	unsure bool
}

// Remove takes user off their channel's allow-list.
func (r *roster) Remove(user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed[user] = true
}

// Unsure has the channels unable to tell, or able again.
func (r *roster) Unsure(unsure bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsure = unsure
}

func (r *roster) Admits(_ context.Context, user string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unsure {
		return false, errors.New("the platform does not answer")
	}
	return !r.removed[user], nil
}

type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// scriptText is what the model answers in the seeded conversation: it
// must show as text, never run.
const scriptText = `Here it is: <script>document.title="pwned"</script> <b>bold?</b>`

// newSite starts a site and seeds it: a conversation with a tool call,
// a pending approval, tasks of two people, memories, a quarantined event.
func newSite(t testing.TB) *site {
	t.Helper()
	var runs atomic.Int32
	env := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		if err := r.Add(tools.FindTools(r)); err != nil {
			return err
		}
		return r.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive for good.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}})
	logs := &chattest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	router := bridge.NewRouter(env.Engine, "loadout")
	var hub bridge.Hub
	roster := &roster{Hub: &hub, removed: map[string]bool{}}
	inR, inW := io.Pipe()
	out := &syncBuffer{}
	con := console.New(console.Config{Delivery: bridge.Delivery{Logger: log}, In: inR, Out: out}, router, env.Store)
	hub.Add(con, nil)
	done := make(chan struct{})
	go func() { defer close(done); con.Run(ctx) }()
	t.Cleanup(func() { cancel(); inW.Close(); <-done })

	clk := &clock{at: time.Now()}
	sched := schedule.New(schedule.Config{Logger: log}, env.Store, hub.Submit)
	if err := sched.Register(env.Registry); err != nil {
		t.Fatal(err)
	}
	// Google, with me connected through the fake OAuth server.
	oauth := googletest.NewOAuthServer(t, "cid")
	acc, err := google.New(google.Config{ClientID: "cid", ClientSecret: "s", RedirectURL: "http://127.0.0.1:1/oauth/google/callback",
		Scopes: []string{"https://www.googleapis.com/auth/gmail.readonly"}, Key: bytes.Repeat([]byte{1}, 32), Store: env.Store,
		AuthURL: oauth.AuthURL(), TokenURL: oauth.TokenURL(), RevokeURL: oauth.RevokeURL()})
	if err != nil {
		t.Fatal(err)
	}
	authURL, err := acc.AuthURL(me, me)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := url.Parse(oauth.Approve(t, authURL, "me-access", "me-refresh", ""))
	if _, err := acc.Finish(ctx, back.Query().Get("state"), back.Query().Get("code")); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := ui.New(ui.Config{Enabled: true, AdminToken: adminToken}, ui.Deps{
		Store: env.Store, Chats: roster, Registry: env.Registry, Scheduler: sched, Google: acc, Listen: strings.TrimPrefix(srv.URL, "http://"),
		Logger: log, Now: clk.Now,
		Status: func(context.Context) ui.Status {
			return ui.Status{Model: "test-model", Channels: []ui.ChannelState{{Name: "console", Ready: true, Allowed: []string{me}}},
				Errors: []string{"2 tool calls failed"}}
		},
		Settings: func() []ui.Setting {
			return []ui.Setting{{Key: "llm.model", Value: "test-model"}, {Key: "ui.admin_token", Value: "set", Secret: true}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Mount(mux)
	c.Register(router)
	s := &site{URL: srv.URL, Env: env, Store: env.Store, Console: c, Logs: logs, Out: out, Runs: &runs, Clock: clk, Router: router, Google: acc, Roster: roster}

	// A conversation: a question, the model's answer with markup, then a
	// destructive call held for approval.
	env.Model.Text(scriptText)
	env.Model.Call("purge_archive", `{}`)
	env.Model.Text("The archive is gone.")
	say := func(text string) {
		if _, err := io.WriteString(inW, text+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	say("show me some markup")
	chattest.Eventually(t, "the first answer", func() bool { return strings.Contains(out.String(), "bold?") })
	say("purge the archive")
	chattest.Eventually(t, "the question", func() bool {
		p, _ := env.Store.PendingApprovals(ctx, me)
		return len(p) == 1
	})
	p, _ := env.Store.PendingApprovals(ctx, me)
	s.Approval = p[0]
	// Tasks of two people, memories, a quarantined event.
	if s.TaskMine, err = env.Store.CreateTask(ctx, schedule.Task{ChatKey: me, UserKey: me, Prompt: "water the plants", Kind: schedule.Every,
		Interval: time.Hour, NextRun: time.Now().Add(time.Hour), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if s.TaskOther, err = env.Store.CreateTask(ctx, schedule.Task{ChatKey: other, UserKey: other, Prompt: "secret plans of other", Kind: schedule.Every,
		Interval: time.Hour, NextRun: time.Now().Add(time.Hour), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.SaveMemory(ctx, me, "likes green tea"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.SaveMemory(ctx, other, "other's private memory"); err != nil {
		t.Fatal(err)
	}
	it, _, err := env.Store.Accept(ctx, "telegram", bridge.Pending{ID: "update:7", Route: []byte(`{}`),
		Inbound: chat.Inbound{ChatKey: other, UserKey: other, Text: "a message that crashed every time"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Finish(ctx, it.Seq, bridge.StateFailed); err != nil {
		t.Fatal(err)
	}
	seedTraffic(t, env.Store, time.Now())
	// A group chat of me and other, where a result personal to other
	// was recorded.
	grp, err := env.Store.OpenSession(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Append(ctx, grp.ID, []chat.Message{
		{Role: chat.RoleUser, Text: "hi all", UserKey: me},
		{Role: chat.RoleUser, Text: "read my mail", UserKey: other},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "gmail_read", Arguments: `{}`}}},
		{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "gmail_read", Status: tools.StatusSuccess, Text: otherMail, UserKey: other},
	}, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	ev, err := env.Store.Quarantined(ctx, 10)
	if err != nil || len(ev) != 1 {
		t.Fatalf("quarantined: %v %v", ev, err)
	}
	s.Event = ev[0]
	return s
}

// client is a browser-like HTTP client with its own cookies that does
// not follow redirects.
func client(t testing.TB) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches a page and returns its status and body.
func get(t testing.TB, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post sends a form.
func post(t testing.TB, c *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token a page embeds.
func csrf(t testing.TB, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return m[1]
}

// operator signs c in with the token.
func (s *site) operator(t testing.TB, c *http.Client) string {
	t.Helper()
	code, body := post(t, c, s.URL+"/login", url.Values{"token": {adminToken}})
	if code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", code, body)
	}
	_, body = get(t, c, s.URL+"/")
	return csrf(t, body)
}

var linkRE = regexp.MustCompile(`https?://\S+/signin\?t=\S+`)

// person signs c in as me, with the link /web sends in the console.
func (s *site) person(t testing.TB, c *http.Client) string {
	t.Helper()
	link := s.link(t)
	tok := link[strings.Index(link, "t=")+2:]
	code, body := post(t, c, s.URL+"/signin", url.Values{"t": {tok}})
	if code != http.StatusSeeOther {
		t.Fatalf("link sign-in: %d %s", code, body)
	}
	_, body = get(t, c, s.URL+"/")
	return csrf(t, body)
}

// signIn signs c in as user with a link made for them, as /web makes
// one, and returns the session's CSRF token.
func (s *site) signIn(t testing.TB, c *http.Client, user string) string {
	t.Helper()
	link, err := s.Console.Link(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	code, body := post(t, c, s.URL+"/signin", url.Values{"t": {link[strings.Index(link, "t=")+2:]}})
	if code != http.StatusSeeOther {
		t.Fatalf("link sign-in as %s: %d %s", user, code, body)
	}
	_, body = get(t, c, s.URL+"/")
	return csrf(t, body)
}

// link asks for /web in the console chat and returns the link sent.
func (s *site) link(t testing.TB) string {
	t.Helper()
	reply, err := s.Router.Handle(context.Background(), chat.Inbound{ChatKey: me, UserKey: me, Text: "/web"})
	if err != nil {
		t.Fatal(err)
	}
	link := linkRE.FindString(reply.Text)
	if link == "" {
		t.Fatalf("no link in %q", reply.Text)
	}
	return link
}

// seedTraffic writes a month of past conversations in two more
// channels, as the store holds them, for the charts and chat lists.
func seedTraffic(t testing.TB, db *store.DB, now time.Time) {
	t.Helper()
	g := db.Gorm()
	for i, key := range []string{"telegram:1001", "slack:T1/C77"} {
		if err := g.Exec(`INSERT INTO sessions (chat_key, opened_at, messages, prompt_tokens, completion_tokens, cached_tokens) VALUES (?, ?, 0, 0, 0, 0)`,
			key, now.Add(-30*24*time.Hour)).Error; err != nil {
			t.Fatal(err)
		}
		var sid int64
		g.Raw(`SELECT id FROM sessions WHERE chat_key = ?`, key).Scan(&sid)
		for h := 0; h < 30*24; h += 5 + i*2 {
			at := now.Add(-time.Duration(h) * time.Hour)
			n := 1 + (h/5+i)%4
			for range n {
				if err := g.Exec(`INSERT INTO messages (session_id, role, text, user_key, tokens, prompt_tokens, completion_tokens, cached_tokens, created_at) VALUES (?, 'user', 'hello', ?, 3, 0, 0, 0, ?)`,
					sid, key, at).Error; err != nil {
					t.Fatal(err)
				}
				if err := g.Exec(`INSERT INTO messages (session_id, role, text, tokens, prompt_tokens, completion_tokens, cached_tokens, created_at) VALUES (?, 'assistant', 'hi', 2, ?, ?, 0, ?)`,
					sid, 300+h%200, 40+h%30, at).Error; err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
