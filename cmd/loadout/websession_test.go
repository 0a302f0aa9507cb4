package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/bridge/webui"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/settings"
)

// webServe runs loadout as serve does, with the console, the browser
// chat and Telegram letting in users (a YAML list's items), on the store
// at db. It returns the app, the console's address and a stop function.
func webServe(t *testing.T, tg *telegramtest.Server, model *chattest.ModelServer, db, users string) (*app, string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\nhttp:\n  shutdown_grace: 5s\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n"+
		"ui:\n  enabled: true\n  admin_token: a-long-operator-token-123\n  base_url: %s\nwebui:\n  enabled: true\n",
		model.URL, db, telegramtest.Token, tg.Endpoint(), users, base)
	cfg, err := settings.Parse([]byte(raw), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	if err := a.wireUI(); err != nil {
		t.Fatal(err)
	}
	chans, err := a.channels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stop := startRun(t, a, ln, chans)
	chattest.Eventually(t, "the channels ready", func() bool { return len(a.hub.NotReady()) == 0 })
	return a, base, func() { stop(); a.db.Close() }
}

var signinLink = regexp.MustCompile(`http://\S+/signin\?t=[\w-]+`)

// browser is a browser's cookies and requests, not following redirects.
type browser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(req *http.Request) (int, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *browser) get(u string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.do(req)
}

// post sends a form, with the CSRF token in the header when it is not "".
func (b *browser) post(u string, form url.Values, csrf string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	return b.do(req)
}

// signIn uses a /web link.
func (b *browser) signIn(base, link string) {
	b.t.Helper()
	if code, body := b.post(base+"/signin", url.Values{"t": {link[strings.Index(link, "t=")+2:]}}, ""); code != http.StatusSeeOther {
		b.t.Fatalf("sign-in: %d %s", code, body)
	}
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// chatToken opens the browser chat's page and returns the CSRF token it
// embeds.
func (b *browser) chatToken(base string) string {
	b.t.Helper()
	code, body := b.get(base + "/chat")
	m := csrfMeta.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		b.t.Fatalf("the chat page: %d %s", code, body)
	}
	return m[1]
}

// webLink sends /web in Ana's private Telegram chat and returns the link
// the bot sends her.
func webLink(t *testing.T, tg *telegramtest.Server) string {
	t.Helper()
	n := len(tg.Sent())
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42, UserName: "ana"}, Text: "/web"})
	link := signinLink.FindString(tg.WaitSent(t, n+1)[n].Text)
	if link == "" {
		t.Fatalf("no link in %q", tg.Sent()[n].Text)
	}
	return link
}

// The browser chat takes a message only with the session's CSRF token,
// checked by the console itself (ui.Console.CheckCSRF), not a stand-in:
// a post with none, a wrong one, or another session's is refused and
// nothing is taken.
func TestTheBrowserChatChecksTheConsolesCSRFToken(t *testing.T) {
	tg, model := telegramtest.New(t), chattest.NewModelServer(t)
	a, base, _ := webServe(t, tg, model, filepath.Join(t.TempDir(), "loadout.db"), `"42"`)
	ana, other := newBrowser(t), newBrowser(t)
	ana.signIn(base, webLink(t, tg))
	other.signIn(base, webLink(t, tg))
	token, otherToken := ana.chatToken(base), other.chatToken(base)
	if token == otherToken {
		t.Fatal("two sessions share a token")
	}
	for _, bad := range []string{"", "wrong", otherToken} {
		form := url.Values{"id": {"abcdefgh-csrf"}, "text": {"hello"}}
		if code, body := ana.post(base+"/chat/send", form, bad); code != http.StatusForbidden {
			t.Fatalf("a send with token %q: %d %s", bad, code, body)
		}
		form.Set("csrf", bad)
		if code, body := ana.post(base+"/chat/send", form, ""); code != http.StatusForbidden {
			t.Fatalf("a send with the form's token %q: %d %s", bad, code, body)
		}
	}
	var n int64
	a.db.Gorm().Raw("SELECT count(*) FROM inbox_items WHERE channel = 'webui'").Scan(&n)
	if n != 0 {
		t.Fatalf("%d messages taken", n)
	}
	model.Text("Hello.")
	if code, body := ana.post(base+"/chat/send", url.Values{"id": {"abcdefgh-good"}, "text": {"hello"}}, token); code != http.StatusAccepted {
		t.Fatalf("a send with the token: %d %s", code, body)
	}
}

// Found by probing: taking someone off a channel's allow-list did not
// end their access on the web: their sessions went on chatting and
// reading as them, and /web from the browser chat made new links for
// ever. Restarted with a list that no longer names Ana (let in by her
// @username), her pages and chat tell her that her session has ended,
// her sessions are gone, a link made before signs nobody in, and /web
// makes none; restarted with her name listed again, she is let in.
func TestTakenOffTheAllowListEndsTheWebSideAtRestart(t *testing.T) {
	tg, model := telegramtest.New(t), chattest.NewModelServer(t)
	db := filepath.Join(t.TempDir(), "loadout.db")
	a, base, stop := webServe(t, tg, model, db, `"@ana"`)
	b1, b2 := newBrowser(t), newBrowser(t)
	b1.signIn(base, webLink(t, tg))
	b2.signIn(base, webLink(t, tg))
	unused := webLink(t, tg)
	b1.chatToken(base)
	token := b2.chatToken(base)
	fromChat := chat.Inbound{ChatKey: webui.ChatKey("telegram:42"), UserKey: "telegram:42", Text: "/web"}
	if reply, err := a.router.Handle(context.Background(), fromChat); err != nil || !signinLink.MatchString(reply.Text) {
		t.Fatalf("/web from the browser chat: %q %v", reply.Text, err)
	}
	stop()

	a, base, stop = webServe(t, tg, model, db, `"@bea"`)
	code, body := b1.get(base + "/chat")
	if code != http.StatusForbidden || !strings.Contains(body, bridge.TextNotAdmitted) {
		t.Fatalf("the chat page: %d %s", code, body)
	}
	var n int64
	a.db.Gorm().Raw("SELECT count(*) FROM web_sessions WHERE user_key = 'telegram:42'").Scan(&n)
	if n != 0 {
		t.Fatalf("%d sessions left", n)
	}
	if code, _ := b2.get(base + "/"); code != http.StatusSeeOther {
		t.Fatalf("a page of the other session: %d", code)
	}
	if code, body := b2.post(base+"/chat/send", url.Values{"id": {"abcdefgh-gone"}, "text": {"hello"}}, token); code != http.StatusUnauthorized {
		t.Fatalf("a send of the other session: %d %s", code, body)
	}
	if code, body := b1.post(base+"/signin", url.Values{"t": {unused[strings.Index(unused, "t=")+2:]}}, ""); code != http.StatusForbidden || !strings.Contains(body, "Your web session has ended") {
		t.Fatalf("a link made before: %d %s", code, body)
	}
	links := func() (n int64) {
		a.db.Gorm().Raw("SELECT count(*) FROM web_links WHERE user_key = 'telegram:42'").Scan(&n)
		return n
	}
	before := links()
	if reply, err := a.router.Handle(context.Background(), fromChat); err != nil || signinLink.MatchString(reply.Text) || !strings.Contains(reply.Text, "I can't send you a sign-in link") {
		t.Fatalf("/web from the browser chat: %q %v", reply.Text, err)
	}
	if n := links(); n != before {
		t.Fatalf("a link was made: %d, were %d", n, before)
	}
	stop()

	// Listed again: the @username she was let in by is known by her id.
	a, _, stop = webServe(t, tg, model, db, `"@ana"`)
	defer stop()
	if reply, err := a.router.Handle(context.Background(), fromChat); err != nil || !signinLink.MatchString(reply.Text) {
		t.Fatalf("/web from the browser chat, listed again: %q %v", reply.Text, err)
	}
}
