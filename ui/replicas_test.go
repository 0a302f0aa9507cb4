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

// another starts a second process's console on s's database (a file, or
// PostgreSQL with LOADOUT_TEST_DSN) and returns its URL. Its channels let
// every person in, as the first process's do until one is removed.
func (s *site) another(t *testing.T) string {
	t.Helper()
	db, err := store.OpenTest(s.Env.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := ui.New(ui.Config{Enabled: true, AdminToken: adminToken}, ui.Deps{Store: db, Chats: &roster{Hub: &bridge.Hub{}, removed: map[string]bool{}}, Registry: s.Env.Registry,
		Listen: strings.TrimPrefix(srv.URL, "http://"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.Mount(mux)
	return srv.URL
}

// A browser may reach any process sharing the store: a /web link one
// process made is used on the other, once, and the session it starts is
// known to both.
func TestSignInLinkUsedOnAnotherProcess(t *testing.T) {
	s := newSite(t)
	two := s.another(t)
	link := s.link(t)
	tok := link[strings.Index(link, "t=")+2:]
	c := client(t)
	if code, body := post(t, c, two+"/signin", url.Values{"t": {tok}}); code != http.StatusSeeOther {
		t.Fatalf("using the link on the other process: %d %s", code, body)
	}
	// The cookie goes to both (cookies do not tell ports apart).
	for _, base := range []string{two, s.URL} {
		if code, body := get(t, c, base+"/"); code != http.StatusOK || !strings.Contains(body, "My page") {
			t.Fatalf("the person's page at %s: %d", base, code)
		}
	}
	code, body := post(t, client(t), s.URL+"/signin", url.Values{"t": {tok}})
	if code != http.StatusForbidden || !strings.Contains(body, "already used") {
		t.Fatalf("the link used again on the first process: %d %s", code, body)
	}
}

// Sign-in attempts from one address are counted in the store: spread
// over two processes, they are limited as on one.
func TestSignInAttemptsCountedOnAnotherProcess(t *testing.T) {
	s := newSite(t)
	two := s.another(t)
	c := client(t)
	codes := map[int]int{}
	for i := range 6 {
		base := s.URL
		if i%2 == 1 {
			base = two
		}
		code, _ := post(t, c, base+"/login", url.Values{"token": {"wrong-wrong-wrong-wrong"}})
		codes[code]++
	}
	if codes[http.StatusUnauthorized] != 5 || codes[http.StatusTooManyRequests] != 1 {
		t.Fatalf("six attempts over two processes answered %v, want five refused for the token and the sixth for the limit", codes)
	}
}
