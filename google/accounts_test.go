package google_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gmail "google.golang.org/api/gmail/v1"

	"loadout/google"
	"loadout/google/googletest"
	"loadout/store"
	"loadout/tools"
)

const scopeModify = "https://www.googleapis.com/auth/gmail.modify"

var gmailSvc = google.Service{Scopes: []string{scopeModify}}

// testKey is a fixed 32-byte key.
var testKey = bytes.Repeat([]byte{7}, 32)

type env struct {
	t       *testing.T
	oauth   *googletest.OAuthServer
	api     *fakeAPI
	db      *store.DB
	dbPath  string
	acc     *google.Accounts
	now     *clock
	cb      *httptest.Server
	notices chan [2]string
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeAPI answers Gmail's getProfile with the mailbox the bearer token
// belongs to, so a test sees whose account a call reached.
type fakeAPI struct {
	mu      sync.Mutex
	owners  map[string]string // access token → email
	bearers []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	f.bearers = append(f.bearers, tok)
	email, ok := f.owners[tok]
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/gmail/v1/users/me/profile" {
		http.Error(w, `{"error":{"code":404,"message":"Not Found"}}`, http.StatusNotFound)
		return
	}
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"emailAddress": email, "messagesTotal": 42, "threadsTotal": 40, "historyId": "1234"})
}

func (f *fakeAPI) own(token, email string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owners[token] = email
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, api: &fakeAPI{owners: map[string]string{}}, now: &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}, notices: make(chan [2]string, 4)}
	e.oauth = googletest.NewOAuthServer(t, "client-1.apps.googleusercontent.com")
	apiSrv := httptest.NewServer(e.api)
	t.Cleanup(apiSrv.Close)
	e.dbPath = filepath.Join(t.TempDir(), "loadout.db")
	var err error
	e.db, err = store.Open(e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.db.Close() })
	mux := http.NewServeMux()
	e.cb = httptest.NewServer(mux)
	t.Cleanup(e.cb.Close)
	e.acc = e.accounts(apiSrv.URL)
	mux.Handle("GET /oauth/google/callback", e.acc.CallbackHandler(google.NotifierFunc(func(ctx context.Context, chatKey, text string) error {
		e.notices <- [2]string{chatKey, text}
		return nil
	})))
	return e
}

func (e *env) accounts(endpoint string) *google.Accounts {
	a, err := google.New(google.Config{
		ClientID: e.oauth.ClientID, ClientSecret: "secret", RedirectURL: e.cb.URL + "/oauth/google/callback",
		Scopes: []string{scopeModify}, Key: testKey, Store: e.db, Endpoint: endpoint,
		AuthURL: e.oauth.AuthURL(), TokenURL: e.oauth.TokenURL(), RevokeURL: e.oauth.RevokeURL(), Now: e.now.Now,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// connect runs /connect google for user through the callback.
func (e *env) connect(user, access, refresh string) {
	e.t.Helper()
	link, err := e.acc.AuthURL(user, "chat-of-"+user)
	if err != nil {
		e.t.Fatal(err)
	}
	back := e.oauth.Approve(e.t, link, access, refresh, "")
	res, body := get(e.t, back)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "connected") {
		e.t.Fatalf("callback = %d %s", res.StatusCode, body)
	}
}

func get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func as(user string) context.Context {
	return tools.WithCaller(context.Background(), tools.Caller{ChatKey: "telegram:-100", UserKey: user})
}

// mailbox calls Gmail getProfile as user and returns the mailbox reached.
func (e *env) mailbox(acc *google.Accounts, user string) (string, error) {
	ctx := as(user)
	opts, err := acc.Options(ctx, gmailSvc)
	if err != nil {
		return "", err
	}
	svc, err := gmail.NewService(ctx, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := svc.Users.GetProfile("me").Context(ctx).Do()
	if err != nil {
		return "", google.MapError(err, "the mailbox")
	}
	return p.EmailAddress, nil
}

func code(err error) string {
	var te *tools.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

func TestConnectThroughCallbackStoresTokenAndTellsChat(t *testing.T) {
	e := newEnv(t)
	link, err := e.acc.AuthURL("telegram:42", "telegram:42")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	q := u.Query()
	// The groups' scopes, and openid email to learn which account it is.
	if q.Get("scope") != "email "+scopeModify+" openid" || q.Get("prompt") != "consent" || len(q.Get("state")) < 40 {
		t.Fatalf("link = %s", link)
	}
	e.api.own("ana-access", "ana@example.com")
	e.oauth.Emails = map[string]string{"ana-access": "ana@example.com"}
	back := e.oauth.Approve(t, link, "ana-access", "ana-refresh", "")
	res, body := get(t, back)
	if res.StatusCode != http.StatusOK || strings.Contains(body, "ana-access") {
		t.Fatalf("callback = %d %s", res.StatusCode, body)
	}
	select {
	case n := <-e.notices:
		if n[0] != "telegram:42" || n[1] != google.ConnectedText("ana@example.com") || !strings.Contains(n[1], "ana@example.com is connected") {
			t.Fatalf("notice = %q", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("chat was not told")
	}
	if got, err := e.mailbox(e.acc, "telegram:42"); err != nil || got != "ana@example.com" {
		t.Fatalf("mailbox = %q, %v", got, err)
	}
	if ok, _ := e.acc.Connected(context.Background(), "telegram:42"); !ok {
		t.Fatal("not connected after callback")
	}
	if email, ok, _, err := e.acc.Account(context.Background(), "telegram:42"); !ok || err != nil || email != "ana@example.com" {
		t.Fatalf("account = %q, %v, %v", email, ok, err)
	}
}

func TestCallbackRefusesWrongReusedAndExpiredState(t *testing.T) {
	e := newEnv(t)
	cbURL := e.cb.URL + "/oauth/google/callback"

	// Wrong state.
	res, _ := get(t, cbURL+"?state=forged&code=x")
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("wrong state: %d", res.StatusCode)
	}

	// Reused state: the first use connects, the second is refused.
	link, _ := e.acc.AuthURL("slack:T1:U2", "slack:T1:C9")
	back := e.oauth.Approve(t, link, "a1", "r1", "")
	if res, _ := get(t, back); res.StatusCode != http.StatusOK {
		t.Fatalf("first use: %d", res.StatusCode)
	}
	u, _ := url.Parse(back)
	q := u.Query()
	// Even with a fresh code, the used state is refused.
	back2 := e.oauth.Approve(t, link, "a2", "r2", "")
	u2, _ := url.Parse(back2)
	q.Set("code", u2.Query().Get("code"))
	u.RawQuery = q.Encode()
	if res, _ := get(t, u.String()); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("reused state: %d", res.StatusCode)
	}

	// Expired state: eleven minutes later.
	link, _ = e.acc.AuthURL("telegram:7", "telegram:7")
	back = e.oauth.Approve(t, link, "a3", "r3", "")
	e.now.Add(11 * time.Minute)
	if res, body := get(t, back); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "expired") {
		t.Fatalf("expired state: %d %s", res.StatusCode, body)
	}
	if ok, _ := e.acc.Connected(context.Background(), "telegram:7"); ok {
		t.Fatal("expired state stored a token")
	}
	// A state works within ten minutes.
	link, _ = e.acc.AuthURL("telegram:7", "telegram:7")
	back = e.oauth.Approve(t, link, "a4", "r4", "")
	e.now.Add(9 * time.Minute)
	if res, _ := get(t, back); res.StatusCode != http.StatusOK {
		t.Fatalf("fresh state: %d", res.StatusCode)
	}
}

func TestStateIsBoundToTheUserWhoAsked(t *testing.T) {
	e := newEnv(t)
	link, _ := e.acc.AuthURL("telegram:1", "telegram:-5")
	e.api.own("one-access", "one@example.com")
	back := e.oauth.Approve(t, link, "one-access", "one-refresh", "")
	if res, _ := get(t, back); res.StatusCode != http.StatusOK {
		t.Fatal(res.StatusCode)
	}
	if ok, _ := e.acc.Connected(context.Background(), "telegram:2"); ok {
		t.Fatal("another user got the token")
	}
	if got, err := e.mailbox(e.acc, "telegram:1"); got != "one@example.com" {
		t.Fatalf("mailbox = %q, %v", got, err)
	}
}

func TestDeclinedConsentStoresNothing(t *testing.T) {
	e := newEnv(t)
	link, _ := e.acc.AuthURL("telegram:3", "telegram:3")
	u, _ := url.Parse(link)
	res, _ := get(t, e.cb.URL+"/oauth/google/callback?error=access_denied&state="+url.QueryEscape(u.Query().Get("state")))
	if res.StatusCode != http.StatusOK {
		t.Fatal(res.StatusCode)
	}
	if n := <-e.notices; n[1] != google.TextDeclined {
		t.Fatalf("notice = %q", n)
	}
	if ok, _ := e.acc.Connected(context.Background(), "telegram:3"); ok {
		t.Fatal("declined consent stored a token")
	}
}

func TestNotConnectedUser(t *testing.T) {
	e := newEnv(t)
	_, err := e.mailbox(e.acc, "telegram:99")
	if code(err) != tools.CodeNotConnected || !strings.Contains(err.(*tools.Error).Suggestion, "/connect google") {
		t.Fatalf("err = %v", err)
	}
	if _, err := e.acc.Options(context.Background(), gmailSvc); code(err) != tools.CodeNotConnected {
		t.Fatalf("no caller: %v", err)
	}
}

func TestTwoUsersTokensNeverCross(t *testing.T) {
	e := newEnv(t)
	e.api.own("a-access", "a@example.com")
	e.api.own("b-access", "b@example.com")
	e.connect("telegram:1", "a-access", "a-refresh")
	e.connect("slack:T1:U2", "b-access", "b-refresh")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 10; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if got, err := e.mailbox(e.acc, "telegram:1"); got != "a@example.com" {
				errs <- errors.New("user A reached " + got + " " + errString(err))
			}
		}()
		go func() {
			defer wg.Done()
			if got, err := e.mailbox(e.acc, "slack:T1:U2"); got != "b@example.com" {
				errs <- errors.New("user B reached " + got + " " + errString(err))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A scope unticked on the consent screen (or a group turned on after the
// person connected) is permission, naming the group and asking for
// /connect google again; the rest of the account works.
func TestMissingScopeIsPermission(t *testing.T) {
	e := newEnv(t)
	link, _ := e.acc.AuthURL("telegram:5", "telegram:5")
	back := e.oauth.Approve(t, link, "x-access", "x-refresh", "https://www.googleapis.com/auth/drive")
	if res, _ := get(t, back); res.StatusCode != http.StatusOK {
		t.Fatal(res.StatusCode)
	}
	svc := gmailSvc
	svc.Group = "google_gmail"
	_, err := e.acc.Options(as("telegram:5"), svc)
	var te *tools.Error
	if code(err) != tools.CodePermission || !strings.Contains(err.Error(), "google_gmail") || !errors.As(err, &te) || !strings.Contains(te.Suggestion, "/connect google again") {
		t.Fatalf("err = %v", err)
	}
	if _, err := e.acc.Options(as("telegram:5"), google.Service{Path: "drive/v3/", Scopes: []string{"https://www.googleapis.com/auth/drive"}}); err != nil {
		t.Fatalf("granted scope refused: %v", err)
	}
}

func TestRefreshedTokenIsPersisted(t *testing.T) {
	e := newEnv(t)
	e.api.own("old-access", "ana@example.com")
	e.api.own(googletest.RefreshedAccess("ana-refresh", 1), "ana@example.com")
	e.oauth.ExpiresIn = 5 // stale at once: oauth2 renews 10s before expiry
	e.connect("telegram:42", "old-access", "ana-refresh")
	e.oauth.ExpiresIn = 0
	if got, err := e.mailbox(e.acc, "telegram:42"); err != nil || got != "ana@example.com" {
		t.Fatalf("mailbox = %q, %v", got, err)
	}
	if n := e.oauth.Refreshes("ana-refresh"); n != 1 {
		t.Fatalf("refreshes = %d", n)
	}
	// A fresh Accounts on the same store uses the saved token without
	// refreshing again.
	if got, err := e.mailbox(e.accounts(e.apiURL()), "telegram:42"); err != nil || got != "ana@example.com" {
		t.Fatalf("mailbox after restart = %q, %v", got, err)
	}
	if n := e.oauth.Refreshes("ana-refresh"); n != 1 {
		t.Fatalf("refreshed token was not saved: %d refreshes", n)
	}
	e.api.mu.Lock()
	last := e.api.bearers[len(e.api.bearers)-1]
	e.api.mu.Unlock()
	if last != googletest.RefreshedAccess("ana-refresh", 1) {
		t.Fatalf("bearer = %q", last)
	}
}

func (e *env) apiURL() string {
	// The endpoint the env's Accounts were built with.
	return e.acc.Endpoint()
}

func TestRefusedRefreshMarksDisconnected(t *testing.T) {
	e := newEnv(t)
	e.oauth.ExpiresIn = 5
	e.connect("telegram:42", "old-access", "dead-refresh")
	e.oauth.Refuse("dead-refresh")
	_, err := e.mailbox(e.acc, "telegram:42")
	if code(err) != tools.CodeNotConnected {
		t.Fatalf("err = %v", err)
	}
	if ok, _ := e.acc.Connected(context.Background(), "telegram:42"); ok {
		t.Fatal("still connected")
	}
	// Later calls fail fast without asking Google again, and the model
	// is told to have the person reconnect (and why it may be weekly).
	_, err = e.acc.Options(as("telegram:42"), gmailSvc)
	var te *tools.Error
	if code(err) != tools.CodeNotConnected || !errors.As(err, &te) || !strings.Contains(te.Suggestion, "/connect google again") || !strings.Contains(te.Suggestion, "Testing status") {
		t.Fatalf("err = %v", err)
	}
}

func TestDatabaseHoldsNoClearToken(t *testing.T) {
	e := newEnv(t)
	e.connect("telegram:42", "ya29.secret-access-token", "1//secret-refresh-token")
	if ok, _ := e.acc.Connected(context.Background(), "telegram:42"); !ok {
		t.Fatal("not connected")
	}
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	for _, p := range []string{e.dbPath, e.dbPath + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	if !bytes.Contains(raw, []byte("telegram:42")) {
		t.Fatal("the row is not in the file; the test would prove nothing")
	}
	for _, secret := range []string{"secret-access-token", "secret-refresh-token", "access_token", "refresh_token"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("database file contains %q in clear", secret)
		}
	}
}

func TestWrongKeyCannotReadTokens(t *testing.T) {
	e := newEnv(t)
	e.connect("telegram:42", "acc", "ref")
	other, err := google.New(google.Config{ClientID: "c", Key: bytes.Repeat([]byte{8}, 32), Store: e.db})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Options(as("telegram:42"), gmailSvc); err == nil || code(err) != "" {
		t.Fatalf("wrong key opened the token: %v", err)
	}
}

func TestDisconnectRevokesAndDeletes(t *testing.T) {
	e := newEnv(t)
	e.connect("telegram:42", "acc", "ref")
	if err := e.acc.Disconnect(context.Background(), "telegram:42"); err != nil {
		t.Fatal(err)
	}
	if got := e.oauth.Revoked(); len(got) != 1 || got[0] != "ref" {
		t.Fatalf("revoked = %q", got)
	}
	if sealed, _ := e.db.GoogleToken(context.Background(), "telegram:42"); sealed != nil {
		t.Fatal("token not deleted")
	}
	if err := e.acc.Disconnect(context.Background(), "telegram:42"); !errors.Is(err, google.ErrNotConnected) {
		t.Fatalf("second disconnect = %v", err)
	}
}

// A revoke Google does not answer still deletes the token, and the error
// says which part failed.
func TestDisconnectWhenRevokeFails(t *testing.T) {
	e := newEnv(t)
	e.connect("telegram:42", "acc", "ref")
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	acc, err := google.New(google.Config{
		ClientID: e.oauth.ClientID, ClientSecret: "secret", RedirectURL: e.cb.URL + "/oauth/google/callback",
		Scopes: []string{scopeModify}, Key: testKey, Store: e.db,
		AuthURL: e.oauth.AuthURL(), TokenURL: e.oauth.TokenURL(), RevokeURL: down.URL, Now: e.now.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.Disconnect(context.Background(), "telegram:42"); !errors.Is(err, google.ErrRevokeFailed) {
		t.Fatalf("disconnect = %v, want ErrRevokeFailed", err)
	}
	if sealed, _ := e.db.GoogleToken(context.Background(), "telegram:42"); sealed != nil {
		t.Fatal("token kept after a failed revoke")
	}
}

func TestLoginLoopback(t *testing.T) {
	e := newEnv(t)
	e.api.own("cli-access", "me@example.com")
	pr, pw := io.Pipe()
	type result struct {
		c   google.Connection
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		c, err := e.acc.LoginLoopback(ctx, "console:local", pw)
		pw.Close()
		done <- result{c, err}
	}()
	var link string
	buf := make([]byte, 4096)
	var out strings.Builder
	for link == "" {
		n, err := pr.Read(buf)
		out.Write(buf[:n])
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, e.oauth.AuthURL()) {
				link = line
			}
		}
		if err != nil {
			t.Fatalf("no link printed: %q", out.String())
		}
	}
	go io.Copy(io.Discard, pr)
	u, _ := url.Parse(link)
	if !strings.HasPrefix(u.Query().Get("redirect_uri"), "http://127.0.0.1:") {
		t.Fatalf("redirect = %s", u.Query().Get("redirect_uri"))
	}
	back := e.oauth.Approve(t, link, "cli-access", "cli-refresh", "")
	// A stray request with a wrong state does not end the wait.
	if res, _ := get(t, u.Query().Get("redirect_uri")+"?state=nope&code=x"); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("stray = %d", res.StatusCode)
	}
	if res, _ := get(t, back); res.StatusCode != http.StatusOK {
		t.Fatalf("callback = %d", res.StatusCode)
	}
	r := <-done
	if r.err != nil || r.c.UserKey != "console:local" {
		t.Fatalf("login = %+v, %v", r.c, r.err)
	}
	if got, err := e.mailbox(e.acc, "console:local"); got != "me@example.com" {
		t.Fatalf("mailbox = %q, %v", got, err)
	}
}

func TestParseKey(t *testing.T) {
	k := bytes.Repeat([]byte{0xab}, 32)
	for _, s := range []string{"q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=", strings.Repeat("ab", 32)} {
		got, err := google.ParseKey(s)
		if err != nil || !bytes.Equal(got, k) {
			t.Fatalf("ParseKey(%q) = %x, %v", s, got, err)
		}
	}
	if _, err := google.ParseKey(""); !errors.Is(err, google.ErrNoKey) || !strings.Contains(err.Error(), "openssl rand -base64 32") {
		t.Fatalf("empty: %v", err)
	}
	if _, err := google.ParseKey("c2hvcnQ="); err == nil {
		t.Fatal("short key accepted")
	}
	if _, err := google.New(google.Config{ClientID: "c", Store: nil}); err == nil {
		t.Fatal("no store accepted")
	}
}

func TestParseCredentials(t *testing.T) {
	c, err := google.ParseCredentials([]byte(`{"installed":{"client_id":"id1.apps.googleusercontent.com","project_id":"p","auth_uri":"https://accounts.google.com/o/oauth2/auth","token_uri":"https://oauth2.googleapis.com/token","client_secret":"GOCSPX-1","redirect_uris":["http://localhost"]}}`))
	if err != nil || c.ClientID != "id1.apps.googleusercontent.com" || c.ClientSecret != "GOCSPX-1" || !c.Installed {
		t.Fatalf("installed = %+v, %v", c, err)
	}
	c, err = google.ParseCredentials([]byte(`{"web":{"client_id":"id2","client_secret":"s2","redirect_uris":["https://bot.example.com/oauth/google/callback"]}}`))
	if err != nil || c.ClientID != "id2" || c.Installed || c.RedirectURLs[0] != "https://bot.example.com/oauth/google/callback" {
		t.Fatalf("web = %+v, %v", c, err)
	}
	if _, err := google.ParseCredentials([]byte(`{"type":"service_account"}`)); err == nil {
		t.Fatal("service account accepted")
	}
}

// A /connect google link outlives a restart: it is kept sealed in the
// store, still once only and for ten minutes.
func TestConnectLinkSurvivesARestart(t *testing.T) {
	e := newEnv(t)
	link, err := e.acc.AuthURL("telegram:42", "telegram:42")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	state := u.Query().Get("state")
	var sealed []byte
	e.db.Gorm().Raw("SELECT sealed FROM google_states WHERE state = ?", state).Scan(&sealed)
	if len(sealed) == 0 || strings.Contains(string(sealed), "telegram:42") {
		t.Fatalf("the pending link is not stored sealed: %q", sealed)
	}
	restarted := e.accounts("")
	back := e.oauth.Approve(t, link, "ana-access", "ana-refresh", "")
	bu, _ := url.Parse(back)
	c, err := restarted.Finish(context.Background(), bu.Query().Get("state"), bu.Query().Get("code"))
	if err != nil || c.UserKey != "telegram:42" {
		t.Fatalf("after a restart: %+v, %v", c, err)
	}
	if _, err := restarted.Finish(context.Background(), state, "code"); !errors.Is(err, google.ErrUnknownState) {
		t.Fatalf("used twice: %v", err)
	}
	late, _ := e.acc.AuthURL("telegram:42", "telegram:42")
	lu, _ := url.Parse(late)
	e.now.Add(google.StateTTL + time.Second)
	if _, err := e.accounts("").Finish(context.Background(), lu.Query().Get("state"), "code"); !errors.Is(err, google.ErrStateExpired) {
		t.Fatalf("expired: %v", err)
	}
}
