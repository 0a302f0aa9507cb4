package google_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/google"
	"loadout/google/googletest"
	"loadout/store"
)

// Google may send the person back to any process sharing the store (a
// file, or PostgreSQL with LOADOUT_TEST_DSN): a /connect google link
// one process made is finished by the other's callback, once, and the
// first then reaches the person's mailbox with the token the other
// stored.
func TestConnectFinishedByAnotherProcess(t *testing.T) {
	oauth := googletest.NewOAuthServer(t, "client-1.apps.googleusercontent.com")
	api := &fakeAPI{owners: map[string]string{}}
	apiSrv := httptest.NewServer(api)
	defer apiSrv.Close()
	path := filepath.Join(t.TempDir(), "loadout.db")
	now := &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	notices := make(chan [2]string, 2)
	var public string // the deployment's one callback URL
	process := func() (*google.Accounts, *httptest.Server) {
		db, err := store.OpenTest(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		mux := http.NewServeMux()
		cb := httptest.NewServer(mux)
		t.Cleanup(cb.Close)
		if public == "" {
			public = cb.URL + "/oauth/google/callback"
		}
		acc, err := google.New(google.Config{ClientID: oauth.ClientID, ClientSecret: "secret", RedirectURL: public,
			Scopes: []string{scopeModify}, Key: testKey, Store: db, Endpoint: apiSrv.URL,
			AuthURL: oauth.AuthURL(), TokenURL: oauth.TokenURL(), RevokeURL: oauth.RevokeURL(), Now: now.Now})
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("GET /oauth/google/callback", acc.CallbackHandler(google.NotifierFunc(func(_ context.Context, chatKey, text string) error {
			notices <- [2]string{chatKey, text}
			return nil
		})))
		return acc, cb
	}
	one, _ := process()
	_, cbTwo := process()

	link, err := one.AuthURL("telegram:42", "telegram:42")
	if err != nil {
		t.Fatal(err)
	}
	api.own("ana-access", "ana@example.org")
	back, _ := url.Parse(oauth.Approve(t, link, "ana-access", "ana-refresh", ""))
	toTwo, _ := url.Parse(cbTwo.URL)
	back.Host = toTwo.Host
	if res, body := get(t, back.String()); res.StatusCode != http.StatusOK || !strings.Contains(body, "connected") {
		t.Fatalf("the other process's callback = %d %s", res.StatusCode, body)
	}
	if n := <-notices; n[0] != "telegram:42" || !strings.Contains(n[1], "connected") {
		t.Fatalf("told %q", n)
	}
	if res, _ := get(t, back.String()); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("the link finished twice: %d", res.StatusCode)
	}
	e := &env{t: t}
	if got, err := e.mailbox(one, "telegram:42"); err != nil || got != "ana@example.org" {
		t.Fatalf("the first process reached %q, %v", got, err)
	}
}
