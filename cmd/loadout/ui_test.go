package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/settings"
)

// With ui.enabled, serve's mux has the console: /login answers, a page
// sends an anonymous visitor there, /web answers in the console chat
// with a link, and channels get the console as bridge.Env.Web.
func TestServeWithUI(t *testing.T) {
	cfg, err := settings.Parse([]byte("ui:\n  enabled: true\n  admin_token: ${TOKEN}\n"), env(map[string]string{"TOKEN": "a-long-operator-token-123"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	if err := a.wireUI(); err != nil {
		t.Fatal(err)
	}
	if a.web == nil {
		t.Fatal("no WebAuth for the channels")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, a, ln, nil)
	base := "http://" + ln.Addr().String()
	nc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := nc.Get(base + "/chats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("/chats anonymous: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = nc.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/login: %d", resp.StatusCode)
	}
	reply, err := a.router.Handle(context.Background(), chat.Inbound{ChatKey: "console:local", UserKey: "console:local", Text: "/web"})
	if err != nil {
		t.Fatal(err)
	}
	// No channel runs in this test, so no chat is known to be private.
	if !strings.Contains(reply.Text, "private chat") {
		t.Fatalf("/web: %q", reply.Text)
	}
	var settings []string
	for _, s := range cfg.Settings() {
		settings = append(settings, s.Key+"="+s.Value)
	}
	all := strings.Join(settings, "\n")
	if strings.Contains(all, "a-long-operator-token-123") || !strings.Contains(all, "ui.admin_token=set") || !strings.Contains(all, "llm.api_key=unset") {
		t.Fatalf("settings:\n%s", all)
	}
}

// ui.enabled without a usable token is an error naming the key.
func TestUIConfigChecked(t *testing.T) {
	for _, raw := range []string{"ui:\n  enabled: true\n", "ui:\n  enabled: true\n  admin_token: short\n"} {
		_, err := settings.Parse([]byte(raw), env(nil))
		if err == nil || !strings.Contains(err.Error(), "ui.admin_token") {
			t.Errorf("%q: %v", raw, err)
		}
	}
	_, err := settings.Parse([]byte("ui:\n  enabled: true\n  admin_token: a-long-operator-token-123\n  base_url: not a url\n  session_ttl: 1s\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "ui.base_url") || !strings.Contains(err.Error(), "ui.session_ttl") {
		t.Errorf("bad base_url and session_ttl: %v", err)
	}
}

// With ui.enabled false, nothing of the console exists: no route and no
// WebAuth (wireUI, the one place it is built, runs only when enabled).
func TestNoUIWhenDisabled(t *testing.T) {
	a, ln := bareApp(t)
	if a.web != nil {
		t.Fatal("a console exists")
	}
	startRun(t, a, ln, nil)
	resp, err := http.Get("http://" + ln.Addr().String() + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/login with the console off: %d", resp.StatusCode)
	}
}
