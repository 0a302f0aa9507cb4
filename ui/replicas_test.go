package ui_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/store"
	"loadout/ui"
)

// A browser may reach any process sharing the store (a file, or
// PostgreSQL with LOADOUT_TEST_DSN): a /web link one process made is
// used on the other, once, and the session it starts is known to both.
func TestSignInLinkUsedOnAnotherProcess(t *testing.T) {
	s := newSite(t)
	db, err := store.OpenTest(s.Env.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	two, err := ui.New(ui.Config{Enabled: true, AdminToken: adminToken}, ui.Deps{Store: db, Chats: &bridge.Hub{}, Registry: s.Env.Registry,
		Listen: strings.TrimPrefix(srv.URL, "http://"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	two.Mount(mux)

	link := s.link(t)
	tok := link[strings.Index(link, "t=")+2:]
	c := client(t)
	if code, body := post(t, c, srv.URL+"/signin", url.Values{"t": {tok}}); code != http.StatusSeeOther {
		t.Fatalf("using the link on the other process: %d %s", code, body)
	}
	// The cookie goes to both (cookies do not tell ports apart).
	for _, base := range []string{srv.URL, s.URL} {
		if code, body := get(t, c, base+"/"); code != http.StatusOK || !strings.Contains(body, "My page") {
			t.Fatalf("the person's page at %s: %d", base, code)
		}
	}
	code, body := post(t, client(t), s.URL+"/signin", url.Values{"t": {tok}})
	if code != http.StatusForbidden || !strings.Contains(body, "already used") {
		t.Fatalf("the link used again on the first process: %d %s", code, body)
	}
}
