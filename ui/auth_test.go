package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/chat"
)

// routes are every page and action of the console.
var (
	pages   = []string{"/", "/chats", "/conversation?key=console:local", "/approvals", "/people", "/person?key=console:local", "/tools", "/tools?q=calendar", "/config"}
	actions = []string{"/logout", "/approvals/decide", "/events/retry", "/events/drop", "/tasks/act", "/memories/delete", "/google/revoke", "/sessions/revoke"}
)

// Nothing but /login and /signin answers a request without a session:
// pages send it to /login, actions are refused, and nothing changes.
func TestAnonymousRefused(t *testing.T) {
	s := newSite(t)
	c := client(t)
	for _, p := range pages {
		code, body := get(t, c, s.URL+p)
		if code != http.StatusSeeOther || strings.Contains(body, "console:local") {
			t.Errorf("GET %s without a session: %d %q", p, code, body)
		}
	}
	for _, p := range actions {
		code, _ := post(t, c, s.URL+p, url.Values{"seq": {strconv.FormatInt(s.Event.Seq, 10)}, "id": {strconv.FormatInt(s.TaskMine.ID, 10)}, "do": {"delete"}})
		if code != http.StatusForbidden {
			t.Errorf("POST %s without a session: %d", p, code)
		}
	}
	if code, _ := get(t, c, s.URL+"/login"); code != http.StatusOK {
		t.Errorf("/login: %d", code)
	}
	if _, err := s.Store.Task(context.Background(), s.TaskMine.ID); err != nil {
		t.Errorf("the task is gone: %v", err)
	}
	if ev, _ := s.Store.Quarantined(context.Background(), 10); len(ev) != 1 {
		t.Errorf("the event changed: %v", ev)
	}
}

// A wrong token is refused and logged; the right one signs in with a
// cookie that is HttpOnly, SameSite=Strict and expiring; every answer
// carries a strict Content-Security-Policy.
func TestOperatorSignIn(t *testing.T) {
	s := newSite(t)
	c := client(t)
	code, body := post(t, c, s.URL+"/login", url.Values{"token": {"not-the-token-at-all"}})
	if code != http.StatusUnauthorized || !strings.Contains(body, "not right") {
		t.Fatalf("wrong token: %d %s", code, body)
	}
	if !strings.Contains(s.Logs.String(), "wrong token") || strings.Contains(s.Logs.String(), "not-the-token-at-all") {
		t.Errorf("the refusal is not logged, or the typed token is:\n%s", s.Logs)
	}
	resp, err := c.PostForm(s.URL+"/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].MaxAge <= 0 {
		t.Fatalf("cookie: %+v", ck)
	}
	resp, err = c.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); resp.StatusCode != http.StatusOK || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Fatalf("overview: %d, CSP %q", resp.StatusCode, csp)
	}
	if rp, fo := resp.Header.Get("Referrer-Policy"), resp.Header.Get("X-Frame-Options"); rp != "same-origin" || fo != "DENY" {
		t.Fatalf("Referrer-Policy %q, X-Frame-Options %q", rp, fo)
	}
	if strings.Contains(s.Logs.String(), adminToken) {
		t.Error("the admin token reached the log")
	}
}

// Sign-in attempts are limited per address.
func TestSignInRateLimited(t *testing.T) {
	s := newSite(t)
	c := client(t)
	var last int
	for range 8 {
		last, _ = post(t, c, s.URL+"/login", url.Values{"token": {"wrong-wrong-wrong-wrong"}})
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("the 8th attempt: %d", last)
	}
	if code, _ := post(t, c, s.URL+"/login", url.Values{"token": {adminToken}}); code != http.StatusTooManyRequests {
		t.Fatalf("even the right token is held back while limited: %d", code)
	}
}

// A state-changing request without the session's CSRF token, with a
// forged one, with one of an earlier session (replayed), or posted from
// another site is refused, logged, and changes nothing.
func TestCSRFRefused(t *testing.T) {
	s := newSite(t)
	c := client(t)
	old := s.operator(t, c)
	// Sign out and in again: the earlier token is the replay.
	if code, _ := post(t, c, s.URL+"/logout", url.Values{"csrf": {old}}); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	token := s.operator(t, c)
	if token == old {
		t.Fatal("a new session has the old CSRF token")
	}
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "id": {strconv.FormatInt(s.TaskMine.ID, 10)}, "do": {"delete"}}
	}
	for name, f := range map[string]url.Values{"none": form(""), "forged": form("AAAA" + token[4:]), "replayed": form(old)} {
		if code, _ := post(t, c, s.URL+"/tasks/act", f); code != http.StatusForbidden {
			t.Errorf("%s token: %d", name, code)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/tasks/act", strings.NewReader(form(token).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site post with the right token: %d", resp.StatusCode)
	}
	if _, err := s.Store.Task(context.Background(), s.TaskMine.ID); err != nil {
		t.Fatalf("the task was deleted: %v", err)
	}
	if n := strings.Count(s.Logs.String(), "CSRF"); n < 4 {
		t.Errorf("%d refusals logged:\n%s", n, s.Logs)
	}
	// With the token, it happens.
	if code, _ := post(t, c, s.URL+"/tasks/act", form(token)); code != http.StatusSeeOther {
		t.Fatalf("with the token: %d", code)
	}
	if _, err := s.Store.Task(context.Background(), s.TaskMine.ID); err == nil {
		t.Fatal("the task is still there")
	}
}

// /web sends a link only in a private chat; the link works once, only
// before it expires, and opening it (a chat app's preview) does not use
// it.
func TestSignInLink(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	reply, err := s.Router.Handle(ctx, chat.Inbound{ChatKey: "telegram:-100", UserKey: me, Text: "/web"})
	if err != nil || linkRE.MatchString(reply.Text) || !strings.Contains(reply.Text, "private chat") {
		t.Fatalf("in a group: %q %v", reply.Text, err)
	}
	link := s.link(t)
	tok := link[strings.Index(link, "t=")+2:]
	c := client(t)
	if code, _ := get(t, c, link); code != http.StatusOK {
		t.Fatalf("opening the link: %d", code)
	}
	if code, _ := post(t, c, s.URL+"/signin", url.Values{"t": {tok}}); code != http.StatusSeeOther {
		t.Fatalf("using the link: %d", code)
	}
	if code, body := get(t, c, s.URL+"/"); code != http.StatusOK || !strings.Contains(body, "My page") {
		t.Fatalf("the person's page: %d", code)
	}
	// Used once: a second browser cannot.
	c2 := client(t)
	code, body := post(t, c2, s.URL+"/signin", url.Values{"t": {tok}})
	if code != http.StatusForbidden || !strings.Contains(body, "already used") {
		t.Fatalf("a reused link: %d %s", code, body)
	}
	// Expired.
	link = s.link(t)
	s.Clock.Add(11 * time.Minute)
	code, body = post(t, c2, s.URL+"/signin", url.Values{"t": {link[strings.Index(link, "t=")+2:]}})
	if code != http.StatusForbidden || !strings.Contains(body, "expired") {
		t.Fatalf("an expired link: %d %s", code, body)
	}
	if code, _ := get(t, c2, s.URL+"/"); code != http.StatusSeeOther {
		t.Fatalf("signed in by a refused link: %d", code)
	}
	logs := s.Logs.String()
	if !strings.Contains(logs, "already used") || !strings.Contains(logs, "expired link") || strings.Contains(logs, tok) {
		t.Errorf("refusals not logged, or the link's secret is:\n%s", logs)
	}
}

// A cookie of another deployment (another store) is refused and logged;
// an expired session and a signed-out one too.
func TestForeignAndOldCookies(t *testing.T) {
	a, b := newSite(t), newSite(t)
	c := client(t)
	a.operator(t, c)
	au, _ := url.Parse(a.URL)
	bu, _ := url.Parse(b.URL)
	c.Jar.SetCookies(bu, c.Jar.Cookies(au))
	if code, _ := get(t, c, b.URL+"/"); code != http.StatusSeeOther {
		t.Fatalf("another deployment's cookie: %d", code)
	}
	if !strings.Contains(b.Logs.String(), "does not know") {
		t.Errorf("not logged:\n%s", b.Logs)
	}
	a.Clock.Add(13 * time.Hour)
	if code, _ := get(t, c, a.URL+"/"); code != http.StatusSeeOther {
		t.Fatalf("an expired session: %d", code)
	}
}

// The operator signs a person out of every browser; the person's next
// request goes to the sign-in form. A person cannot sign out another.
func TestSignOutEverywhere(t *testing.T) {
	s := newSite(t)
	p := client(t)
	ptoken := s.person(t, p)
	if code, _ := post(t, p, s.URL+"/sessions/revoke", url.Values{"csrf": {ptoken}, "user": {"ui:operator"}}); code != http.StatusForbidden {
		t.Fatalf("a person signed the operator out: %d", code)
	}
	op := client(t)
	token := s.operator(t, op)
	if code, _ := post(t, op, s.URL+"/sessions/revoke", url.Values{"csrf": {token}, "user": {me}}); code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", code)
	}
	if code, _ := get(t, p, s.URL+"/"); code != http.StatusSeeOther {
		t.Fatalf("the person is still signed in: %d", code)
	}
	if code, _ := get(t, op, s.URL+"/"); code != http.StatusOK {
		t.Fatalf("the operator was signed out too: %d", code)
	}
}
