package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/slack"
	"loadout/bridge/telegram"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/google/googletest"
	"loadout/google/workspace"
	"loadout/settings"
	"loadout/store"
)

func TestToolsListsGoogleGroupsWithoutGoogleConfig(t *testing.T) {
	t.Setenv("LOADOUT_TOKEN_KEY", "")
	cfgPath, _ := writeConfig(t, "http://127.0.0.1:1/v1", "")
	out, err := runCLI(t, "", "-config", cfgPath, "tools")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"google_gmail ", "google_gmail_settings", "google_drive", "google_calendar"} {
		if !strings.Contains(out, g) {
			t.Errorf("tools output lacks %s:\n%s", g, out)
		}
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestGoogleGroupsHiddenWhenNotConfigured(t *testing.T) {
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	a, err := newApp(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	for _, g := range a.reg.Groups() {
		if strings.HasPrefix(g.Name, "google_") {
			t.Errorf("group %s registered without Google config", g.Name)
		}
	}
	reply, err := a.router.Handle(context.Background(), chat.Inbound{ChatKey: "telegram:1", UserKey: "telegram:1", Text: "/connect google"})
	if err != nil || !strings.Contains(reply.Text, "isn't set up") {
		t.Fatalf("/connect = %q, %v", reply.Text, err)
	}
}

func TestGoogleWithoutTokenKeyRefusesToStart(t *testing.T) {
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.Google.ClientID = "id.apps.googleusercontent.com"
	_, err := newApp(context.Background(), cfg, quietLog())
	if err == nil || !strings.Contains(err.Error(), "openssl rand -base64 32") || !strings.Contains(err.Error(), "google.token_key") {
		t.Fatalf("err = %v", err)
	}
	// The key may come from the environment instead, under either name.
	for _, name := range []string{"LOADOUT_TOKEN_KEY", "LOADOUT_GOOGLE_TOKEN_KEY"} {
		withKey, err := settings.Parse(nil, env(map[string]string{name: base64.StdEncoding.EncodeToString(make([]byte, 32))}))
		if err != nil || withKey.Google.TokenKey == "" {
			t.Fatalf("%s: %v", name, err)
		}
	}
	cfg.Google.TokenKey = base64.StdEncoding.EncodeToString(make([]byte, 32))
	a, err := newApp(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	a.db.Close()
}

// gmailFake answers a Gmail search for the mailbox whose bearer token it
// knows.
type gmailFake struct {
	mu      sync.Mutex
	bearers []string
}

func (f *gmailFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	f.mu.Lock()
	f.bearers = append(f.bearers, auth)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if auth != "Bearer ana-access" {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`)
		return
	}
	switch r.URL.Path {
	case "/gmail/v1/users/me/messages":
		io.WriteString(w, `{"messages":[{"id":"18c2a1f0b2d3e4f5","threadId":"18c2a1f0b2d3e4f5"}],"resultSizeEstimate":1}`)
	case "/gmail/v1/users/me/messages/18c2a1f0b2d3e4f5":
		io.WriteString(w, `{"id":"18c2a1f0b2d3e4f5","threadId":"18c2a1f0b2d3e4f5","labelIds":["INBOX","UNREAD"],"snippet":"Please pay by Friday","internalDate":"1767261600000","payload":{"mimeType":"text/plain","headers":[{"name":"From","value":"Bob <bob@example.com>"},{"name":"Subject","value":"Invoice 42"}]}}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":404,"message":"Not Found"}}`)
	}
}

// googleApp runs an app with Google set up against a fake OAuth server
// and a fake Workspace API served by api.
func googleApp(t *testing.T, model *chattest.ModelServer, oauth *googletest.OAuthServer, api http.Handler) (a *app, base string) {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = "http://" + ln.Addr().String()
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.LLM.BaseURL, cfg.LLM.APIKey = model.URL, "sk-test"
	cfg.HTTP.ShutdownGrace = settings.Duration(5 * time.Second)
	cfg.Google = settings.GoogleConfig{
		ClientID: "id.apps.googleusercontent.com", ClientSecret: "GOCSPX-secret",
		RedirectURL: base + "/oauth/google/callback", Endpoint: srv.URL,
		TokenKey: base64.StdEncoding.EncodeToString(make([]byte, 32)),
		AuthURL:  oauth.AuthURL(), TokenURL: oauth.TokenURL(), RevokeURL: oauth.RevokeURL(),
	}
	a = appWithChannels(t, cfg)
	startRun(t, a, ln, nil)
	return a, base
}

// ask runs text through a's router as in.
func ask(t *testing.T, a *app, in chat.Inbound, text string) string {
	t.Helper()
	in.Text = text
	reply, err := a.router.Handle(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return reply.Text
}

// Found by probing: /connect google in a group posted the sign-in link
// where every member could open it, and whoever consented bound their
// own mailbox to the person who asked. A link is only ever sent in a
// private chat; elsewhere the person is told where to go.
func TestConnectLinkIsNeverPostedWhereOthersSeeIt(t *testing.T) {
	model := chattest.NewModelServer(t)
	oauth := googletest.NewOAuthServer(t, "id.apps.googleusercontent.com")
	a, _ := googleApp(t, model, oauth, &gmailFake{})
	for _, in := range []chat.Inbound{
		{ChatKey: "telegram:-100123", UserKey: "telegram:42"},
		{ChatKey: "telegram:-100123:7", UserKey: "telegram:42"},
		{ChatKey: "slack:T1:C1:1700000000.000100", UserKey: "slack:T1:U1"},
		{ChatKey: "slack:T1:C1", UserKey: "slack:T1:U1"},
	} {
		reply := ask(t, a, in, "/connect google")
		if strings.Contains(reply, oauth.AuthURL()) || strings.Contains(reply, "state=") {
			t.Errorf("%s: the link was posted: %q", in.ChatKey, reply)
		}
		if !strings.Contains(reply, "private") {
			t.Errorf("%s: the person is not told where to connect: %q", in.ChatKey, reply)
		}
	}
	for _, in := range []chat.Inbound{
		{ChatKey: "telegram:42", UserKey: "telegram:42"},
		{ChatKey: "slack:T1:D1", UserKey: "slack:T1:U1"},
	} {
		if reply := ask(t, a, in, "/connect google"); !strings.Contains(reply, oauth.AuthURL()) {
			t.Errorf("%s: no link in a private chat: %q", in.ChatKey, reply)
		}
	}
	// Telegram's deep link from the group opens the private chat with
	// /start connect, which answers with the link.
	if reply := ask(t, a, chat.Inbound{ChatKey: "telegram:42", UserKey: "telegram:42"}, "/start connect"); !strings.Contains(reply, oauth.AuthURL()) {
		t.Errorf("/start connect: %q", reply)
	}
}

func TestConnectGoogleFromChatThenUseGmail(t *testing.T) {
	model := chattest.NewModelServer(t)
	oauth := googletest.NewOAuthServer(t, "id.apps.googleusercontent.com")
	fake := &gmailFake{}
	a, base := googleApp(t, model, oauth, fake)

	var names []string
	for _, g := range a.reg.Groups() {
		names = append(names, g.Name)
	}
	for _, want := range []string{"google_gmail", "google_gmail_settings", "google_drive", "google_calendar"} {
		if !slices.Contains(names, want) {
			t.Errorf("group %s not registered: %v", want, names)
		}
	}

	ana := chat.Inbound{ChatKey: "telegram:-100", UserKey: "telegram:42"}
	say := func(in chat.Inbound, text string) string {
		t.Helper()
		return ask(t, a, in, text)
	}

	// Not connected yet: the model is told so.
	model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	model.Call("gmail_search", `{"query":"is:unread"}`)
	model.Text("Please connect Google first.")
	say(ana, "any unread mail?")
	if last := lastToolResult(model); !strings.Contains(last, "not_connected") || !strings.Contains(last, "/connect google") {
		t.Fatalf("before connecting: %s", last)
	}

	// The link comes in Ana's private chat (never in the group).
	private := chat.Inbound{ChatKey: "telegram:42", UserKey: "telegram:42"}
	reply := say(private, "/connect google")
	link := reply[strings.LastIndex(reply, "\n")+1:]
	u, err := url.Parse(link)
	if err != nil || !strings.HasPrefix(link, oauth.AuthURL()) {
		t.Fatalf("/connect reply = %q", reply)
	}
	scopes := strings.Fields(u.Query().Get("scope"))
	for _, s := range []string{"https://www.googleapis.com/auth/gmail.modify", "https://www.googleapis.com/auth/gmail.settings.basic", "https://www.googleapis.com/auth/drive", "https://www.googleapis.com/auth/calendar"} {
		if !slices.ContainsFunc(scopes, func(x string) bool { return strings.HasPrefix(x, s) }) {
			t.Errorf("scope %s not requested: %v", s, scopes)
		}
	}
	if u.Query().Get("redirect_uri") != base+"/oauth/google/callback" {
		t.Fatalf("redirect_uri = %s", u.Query().Get("redirect_uri"))
	}

	// A forged state is refused; the real one works once.
	if res := httpGet(t, base+"/oauth/google/callback?state=forged&code=x"); res != http.StatusBadRequest {
		t.Fatalf("forged state = %d", res)
	}
	notices := tellingChannel(t, a, "telegram")
	back := oauth.Approve(t, link, "ana-access", "ana-refresh", "")
	if res := httpGet(t, back); res != http.StatusOK {
		t.Fatalf("callback = %d", res)
	}
	// The chat that asked is told, through the channel that owns it.
	told := notices()
	if len(told) != 1 || !strings.HasPrefix(told[0], "telegram:42: ") || !strings.Contains(told[0], "connected") {
		t.Fatalf("chat notices = %q", told)
	}
	if res := httpGet(t, back); res != http.StatusBadRequest {
		t.Fatalf("reused state = %d", res)
	}
	// Ana is told privately which account it was, and /status shows it.
	if !strings.Contains(told[0], "ana-access@example.com is connected") {
		t.Fatalf("notice does not name the account: %q", told[0])
	}
	if st := say(private, "/status"); !strings.Contains(st, "Google account: ana-access@example.com (connected on ") {
		t.Fatalf("/status = %q", st)
	}
	// In the group, others read it: connected, but no address.
	if st := say(ana, "/status"); !strings.Contains(st, "Google account: connected on ") || strings.Contains(st, "@example.com") {
		t.Fatalf("/status in the group = %q", st)
	}
	if st := say(chat.Inbound{ChatKey: "telegram:-100", UserKey: "telegram:7"}, "/status"); !strings.Contains(st, "Google account: not connected") {
		t.Fatalf("/status of someone else = %q", st)
	}

	model.Call("gmail_search", `{"query":"is:unread"}`)
	model.Text("One unread mail: Invoice 42 from Bob.")
	if got := say(ana, "any unread mail now?"); got != "One unread mail: Invoice 42 from Bob." {
		t.Fatalf("reply = %q", got)
	}
	if last := lastToolResult(model); !strings.Contains(last, "Invoice 42") || !strings.Contains(last, "bob@example.com") {
		t.Fatalf("search result = %s", last)
	}

	// Someone else in the same group chat does not get Ana's mailbox.
	model.Call("gmail_search", `{"query":"is:unread"}`)
	model.Text("Connect first.")
	say(chat.Inbound{ChatKey: "telegram:-100", UserKey: "telegram:7"}, "and mine?")
	if last := lastToolResult(model); !strings.Contains(last, "not_connected") {
		t.Fatalf("other user: %s", last)
	}

	if got := say(ana, "/disconnect google"); !strings.Contains(got, "disconnected") {
		t.Fatalf("/disconnect = %q", got)
	}
	if r := oauth.Revoked(); len(r) != 1 || r[0] != "ana-refresh" {
		t.Fatalf("revoked = %v", r)
	}
	if got := say(ana, "/disconnect google"); !strings.Contains(got, "No Google account") {
		t.Fatalf("second /disconnect = %q", got)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, b := range fake.bearers {
		if b != "Bearer ana-access" {
			t.Fatalf("API saw %q", b)
		}
	}
}

func httpGet(t *testing.T, u string) int {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// lastToolResult is the newest tool message the model received.
func lastToolResult(m *chattest.ModelServer) string {
	reqs := m.Requests()
	msgs := reqs[len(reqs)-1].Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "tool" {
			return msgs[i].Content
		}
	}
	return ""
}

func TestGoogleLoginCommand(t *testing.T) {
	oauth := googletest.NewOAuthServer(t, "id.apps.googleusercontent.com")
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.Google = settings.GoogleConfig{
		ClientID: "id.apps.googleusercontent.com", ClientSecret: "s",
		TokenKey: base64.StdEncoding.EncodeToString(make([]byte, 32)),
		AuthURL:  oauth.AuthURL(), TokenURL: oauth.TokenURL(), RevokeURL: oauth.RevokeURL(),
	}
	if err := googleLogin(context.Background(), cfg, quietLog(), "", io.Discard); err == nil || !strings.Contains(err.Error(), "-user") {
		t.Fatalf("without -user: %v", err)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		err := googleLogin(ctx, cfg, quietLog(), "console:local", pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	var printed strings.Builder
	buf := make([]byte, 4096)
	link := ""
	for link == "" {
		n, err := pr.Read(buf)
		printed.Write(buf[:n])
		for _, line := range strings.Split(printed.String(), "\n") {
			if strings.HasPrefix(line, oauth.AuthURL()) {
				link = line
			}
		}
		if err != nil {
			t.Fatalf("no link: %q", printed.String())
		}
	}
	go io.Copy(io.Discard, pr)
	if res := httpGet(t, oauth.Approve(t, link, "cli-access", "cli-refresh", "")); res != http.StatusOK {
		t.Fatalf("callback = %d", res)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	a := &app{cfg: cfg, log: quietLog()}
	var err error
	if a.db, err = store.Open(cfg.Store.Path); err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	acc, err := workspace.Accounts(cfg.Google, a.db, cfg.HTTP.Listen, a.log)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := acc.Connected(context.Background(), "console:local"); !ok || err != nil {
		t.Fatalf("connected = %v, %v", ok, err)
	}
}

// google.groups chooses the Workspace groups: only they are registered
// and consent asks only for their scopes; a name that is no group stops
// start-up naming the key.
func TestGoogleGroupsChooseGroupsAndScopes(t *testing.T) {
	if _, err := settings.Parse([]byte("google:\n  groups: [google_drive, google_mail]\n"), env(nil)); err == nil ||
		!strings.Contains(err.Error(), `google.groups: "google_mail" is not a Workspace group`) {
		t.Fatalf("bad name: %v", err)
	}
	cfg, err := settings.Parse([]byte("google:\n  groups: [google_drive]\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := workspace.Scopes(cfg.Google); !slices.Equal(got, []string{"https://www.googleapis.com/auth/drive"}) {
		t.Fatalf("scopes = %v", got)
	}
	if n := len(workspace.Groups(cfg.Google, workspace.Deps{})); n != 1 {
		t.Fatalf("%d groups", n)
	}
	if all := workspace.Scopes(settings.GoogleConfig{}); len(all) < 4 {
		t.Fatalf("all scopes = %v", all)
	}
}

// tasksFake answers the Tasks API for the mailbox whose bearer token it
// knows.
type tasksFake struct{}

func (f *tasksFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer ana-access" {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials."}}`)
		return
	}
	if r.URL.Path == "/tasks/v1/lists/@default/tasks" && r.Method == http.MethodGet {
		io.WriteString(w, `{"items":[{"id":"t1","title":"Pay rent","due":"2026-03-14T00:00:00.000Z","status":"needsAction"}]}`)
		return
	}
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, `{"error":{"code":404,"message":"Not Found"}}`)
}

// End to end with one of the newer groups: a person connects through the
// configured auth_url and token_url (an httptest OAuth server), the model
// loads google_tasks and lists the tasks as that person, and
// /disconnect revokes the grant at the configured revoke_url.
func TestConnectThenUseTasksThenRevoke(t *testing.T) {
	model := chattest.NewModelServer(t)
	oauth := googletest.NewOAuthServer(t, "id.apps.googleusercontent.com")
	a, base := googleApp(t, model, oauth, &tasksFake{})
	ana := chat.Inbound{ChatKey: "telegram:42", UserKey: "telegram:42"}
	reply := ask(t, a, ana, "/connect google")
	link := reply[strings.LastIndex(reply, "\n")+1:]
	// Incremental: what was granted before stays granted.
	if !strings.HasPrefix(link, oauth.AuthURL()) || !strings.Contains(link, "auth%2Ftasks") || !strings.Contains(link, "include_granted_scopes=true") {
		t.Fatalf("link = %q", link)
	}
	if res := httpGet(t, oauth.Approve(t, link, "ana-access", "ana-refresh", "")); res != http.StatusOK {
		t.Fatalf("callback = %d (base %s)", res, base)
	}
	model.Call("load_tool_group", `{"group_name":"google_tasks"}`)
	model.Call("tasks_list", `{}`)
	model.Text("One task: pay rent by the 14th.")
	if got := ask(t, a, ana, "what's on my to-do list?"); got != "One task: pay rent by the 14th." {
		t.Fatalf("reply = %q", got)
	}
	if last := lastToolResult(model); !strings.Contains(last, `"title":"Pay rent"`) || !strings.Contains(last, `"due":"2026-03-14"`) {
		t.Fatalf("tasks_list gave %s", last)
	}
	if got := ask(t, a, ana, "/disconnect google"); !strings.Contains(got, "revoked") {
		t.Fatalf("/disconnect = %q", got)
	}
	if r := oauth.Revoked(); len(r) != 1 || r[0] != "ana-refresh" {
		t.Fatalf("revoked = %v", r)
	}
}

// google.credentials_file is enough: its client, and its auth_uri and
// token_uri, drive the connect flow.
func TestCredentialsFileEndpointsAreUsed(t *testing.T) {
	model := chattest.NewModelServer(t)
	oauth := googletest.NewOAuthServer(t, "file-client.apps.googleusercontent.com")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	creds := filepath.Join(t.TempDir(), "client_secret.json")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf(`{"web":{"client_id":"file-client.apps.googleusercontent.com","client_secret":"GOCSPX-f",
		"auth_uri":%q,"token_uri":%q,"redirect_uris":[%q]}}`, oauth.AuthURL(), oauth.TokenURL(), base+"/oauth/google/callback")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.LLM.BaseURL, cfg.LLM.APIKey = model.URL, "sk-test"
	cfg.HTTP.ShutdownGrace = settings.Duration(5 * time.Second)
	cfg.Google = settings.GoogleConfig{CredentialsFile: creds, TokenKey: base64.StdEncoding.EncodeToString(make([]byte, 32)), RevokeURL: oauth.RevokeURL()}
	a := appWithChannels(t, cfg)
	startRun(t, a, ln, nil)
	ana := chat.Inbound{ChatKey: "telegram:42", UserKey: "telegram:42"}
	reply := ask(t, a, ana, "/connect google")
	link := reply[strings.LastIndex(reply, "\n")+1:]
	if !strings.HasPrefix(link, oauth.AuthURL()+"?") || !strings.Contains(link, "client_id=file-client") {
		t.Fatalf("link = %q", link)
	}
	if res := httpGet(t, oauth.Approve(t, link, "ana-access", "ana-refresh", "")); res != http.StatusOK {
		t.Fatalf("callback = %d: the code was not exchanged at the file's token_uri", res)
	}
	if st := ask(t, a, ana, "/status"); !strings.Contains(st, "Google account: ana-access@example.com") {
		t.Fatalf("/status = %q", st)
	}
}

// tellingChannel replaces the hub's channel name with one that keeps
// which of its chats are private and records what it sends, "chat key:
// text", on a running pipeline of its own.
func tellingChannel(t *testing.T, a *app, name string) (told func() []string) {
	t.Helper()
	var real bridge.Channel
	for _, c := range a.hub.Channels() {
		if c.Name() == name {
			real = c
		}
	}
	rc := &recordingChannel{Channel: real}
	rc.pipe = bridge.NewPipeline(bridge.PipelineConfig{Channel: name, Inbox: a.db, Handler: a.router, Outlet: rc, Logger: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rc.pipe.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done; rc.pipe.Stop() })
	a.hub.Add(rc, nil)
	return func() []string {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return slices.Clone(rc.sent)
	}
}

type recordingChannel struct {
	bridge.Channel
	pipe *bridge.Pipeline
	mu   sync.Mutex
	sent []string
}

func (c *recordingChannel) Pipeline() *bridge.Pipeline           { return c.pipe }
func (c *recordingChannel) Route(chatKey string) ([]byte, error) { return []byte(chatKey), nil }
func (c *recordingChannel) Split(text string) []string           { return []string{text} }
func (c *recordingChannel) ReadRoute(raw []byte) (any, error)    { return string(raw), nil }
func (c *recordingChannel) Send(_ context.Context, route any, part string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, route.(string)+": "+part)
	return nil
}

// appWithChannels is the app of cfg with the Telegram and Slack channels
// built, not run: the hub knows their chats (which are private).
func appWithChannels(t *testing.T, cfg settings.Config) *app {
	t.Helper()
	tg, sl := cfg.Section(telegram.Kind()).(telegram.Config), cfg.Section(slack.Kind()).(slack.Config)
	tg.Enabled, tg.Token = true, "1:test"
	sl.Enabled, sl.BotToken, sl.AppToken = true, "xoxb-test", "xapp-test"
	cfg.Channels = map[string]any{"telegram": tg, "slack": sl}
	a, err := newApp(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() }) // after the server stops
	if _, err := a.channels(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}
