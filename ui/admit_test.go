package ui_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/ui"
)

// Found by probing: taking someone off their channel's allow-list did
// not end what they reach on the web: their sessions went on (pages,
// actions, the browser chat), a link made before still signed them in,
// and /web made new links for ever. Every request of a person's session
// and every link asks their channel; a person it no longer lets in is
// told so in a sentence, gets no link, and every session of theirs ends.
func TestAPersonTakenOffTheirChannelsListLosesTheWebSide(t *testing.T) {
	s := newSite(t)
	c1, c2 := client(t), client(t)
	s.person(t, c1)
	token2 := s.person(t, c2)
	unused := s.link(t)
	raw, csrf := s.session(t, me)

	s.Roster.Remove(me)
	// The browser chat asks the console who is signed in.
	req := httptest.NewRequest(http.MethodPost, s.URL+"/chat/send", nil)
	req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: raw})
	req.Header.Set("X-CSRF-Token", csrf)
	if user, _, err := s.Console.Viewer(req); !errors.Is(err, bridge.ErrNotAdmitted) || user != "" || s.Console.CheckCSRF(req) {
		t.Fatalf("the browser chat's viewer: %q %v", user, err)
	}
	// Its sessions ended with that: the next request of any of them
	// has no session.
	if code, body := get(t, c1, s.URL+"/"); code != http.StatusSeeOther {
		t.Fatalf("a page of an ended session: %d\n%s", code, body)
	}
	code, body := post(t, c2, s.URL+"/tasks/act", url.Values{"csrf": {token2}, "id": {strconv.FormatInt(s.TaskMine.ID, 10)}, "do": {"pause"}})
	if code != http.StatusForbidden || !strings.Contains(body, "You are not signed in, so nothing was done.") {
		t.Fatalf("an action of an ended session: %d\n%s", code, body)
	}
	if tk, _ := s.Store.Task(context.Background(), s.TaskMine.ID); tk.NextRun.IsZero() {
		t.Fatal("the task was paused")
	}
	// No link: the one made before signs nobody in, /web makes none.
	code, body = post(t, c1, s.URL+"/signin", url.Values{"t": {unused[strings.Index(unused, "t=")+2:]}})
	if code != http.StatusForbidden || !strings.Contains(body, "Your web session has ended") {
		t.Fatalf("a link made before: %d\n%s", code, body)
	}
	if code, _ := get(t, c1, s.URL+"/"); code != http.StatusSeeOther {
		t.Fatalf("the link signed them in: %d", code)
	}
	reply, err := s.Router.Handle(context.Background(), chat.Inbound{ChatKey: me, UserKey: me, Text: "/web"})
	if err != nil || linkRE.MatchString(reply.Text) || !strings.Contains(reply.Text, "I can't send you a sign-in link") {
		t.Fatalf("/web: %q %v", reply.Text, err)
	}
	if _, err := s.Console.Link(context.Background(), me); !errors.Is(err, bridge.ErrNotAdmitted) {
		t.Fatalf("Link: %v", err)
	}
	// A page or an action of a session the refusal meets first gets
	// the sentence, and the session's cookie is dropped.
	for _, path := range []string{"/", "/tasks/act"} {
		raw, csrf := s.session(t, me)
		c := client(t)
		u, _ := url.Parse(s.URL)
		c.Jar.SetCookies(u, []*http.Cookie{{Name: ui.CookieName, Value: raw}})
		var resp *http.Response
		var err error
		if path == "/" {
			resp, err = c.Get(s.URL + path)
		} else {
			resp, err = c.PostForm(s.URL+path, url.Values{"csrf": {csrf}, "id": {strconv.FormatInt(s.TaskMine.ID, 10)}, "do": {"pause"}})
		}
		if err != nil {
			t.Fatal(err)
		}
		b := new(strings.Builder)
		_, _ = io.Copy(b, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(b.String(), "Your web session has ended") || len(c.Jar.Cookies(u)) != 0 {
			t.Fatalf("%s of a session the refusal meets: %d, cookies %v\n%s", path, resp.StatusCode, c.Jar.Cookies(u), b)
		}
	}
	if tk, _ := s.Store.Task(context.Background(), s.TaskMine.ID); tk.NextRun.IsZero() {
		t.Fatal("the task was paused")
	}
	// The operator is not a channel's person: nothing of theirs ends.
	op := client(t)
	s.operator(t, op)
	if code, _ := get(t, op, s.URL+"/chats"); code != http.StatusOK {
		t.Fatalf("the operator: %d", code)
	}
}

// A channel that cannot tell just now whether it lets a person in (its
// platform does not answer) refuses the request with a sentence that
// says so, and ends nothing: the session works again once it can tell.
func TestAChannelThatCannotTellEndsNothing(t *testing.T) {
	s := newSite(t)
	c := client(t)
	s.person(t, c)
	s.Roster.Unsure(true)
	if code, body := get(t, c, s.URL+"/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "Try again in a moment") {
		t.Fatalf("a page: %d\n%s", code, body)
	}
	reply, err := s.Router.Handle(context.Background(), chat.Inbound{ChatKey: me, UserKey: me, Text: "/web"})
	if err != nil || linkRE.MatchString(reply.Text) || !strings.Contains(reply.Text, "couldn't make a sign-in link right now") {
		t.Fatalf("/web: %q %v", reply.Text, err)
	}
	s.Roster.Unsure(false)
	if code, body := get(t, c, s.URL+"/"); code != http.StatusOK {
		t.Fatalf("a page once it can tell: %d\n%s", code, body)
	}
}

// session opens a web session for user in the store, as a sign-in does,
// and returns its cookie's value and CSRF token.
func (s *site) session(t testing.TB, user string) (cookie, csrf string) {
	t.Helper()
	cookie, csrf = "cookie-"+strconv.FormatInt(time.Now().UnixNano(), 36), "csrf-"+strconv.FormatInt(time.Now().UnixNano(), 36)
	h := sha256.Sum256([]byte(cookie))
	if err := s.Store.CreateWebSession(context.Background(), ui.Session{ID: hex.EncodeToString(h[:]), UserKey: user, CSRF: csrf,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return cookie, csrf
}
