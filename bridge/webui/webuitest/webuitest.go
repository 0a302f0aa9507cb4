// Package webuitest signs people in for the browser chat's tests and
// talks to the chat as its page does: Auth is a small stand-in for the
// web side's sessions (a cookie, a CSRF token per session), and Person
// sends messages, files and presses over HTTP and reads the chat's
// Server-Sent Events stream, reconnecting with Last-Event-ID.
package webuitest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
)

// Cookie is the name of the session cookie Auth reads.
const Cookie = "webuitest_session"

// Auth is a bridge.WebAuth over sessions made by SignIn. Safe for
// concurrent use.
type Auth struct {
	mu       sync.Mutex
	sessions map[string]session
	refused  map[string]bool
}

type session struct {
	user  string
	admin bool
	csrf  string
}

var _ bridge.WebAuth = (*Auth)(nil)

// NewAuth returns an Auth with nobody signed in.
func NewAuth() *Auth { return &Auth{sessions: map[string]session{}, refused: map[string]bool{}} }

func random() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SignIn opens a session for user and returns its cookie's value and
// its CSRF token.
func (a *Auth) SignIn(user string, admin bool) (cookie, csrf string) {
	cookie, csrf = random(), random()
	a.mu.Lock()
	a.sessions[cookie] = session{user: user, admin: admin, csrf: csrf}
	a.mu.Unlock()
	return cookie, csrf
}

func (a *Auth) session(r *http.Request) (session, bool) {
	c, err := r.Cookie(Cookie)
	if err != nil {
		return session{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[c.Value]
	return s, ok
}

// Viewer is the session's person: bridge.ErrSignedOut without one,
// bridge.ErrNotAdmitted for a person Refuse named (whose sessions it
// then ends).
func (a *Auth) Viewer(r *http.Request) (string, bool, error) {
	s, ok := a.session(r)
	if !ok {
		return "", false, bridge.ErrSignedOut
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused[s.user] {
		for k, o := range a.sessions {
			if o.user == s.user {
				delete(a.sessions, k)
			}
		}
		return "", false, bridge.ErrNotAdmitted
	}
	return s.user, s.admin, nil
}

// Refuse has the channel user came from no longer let them in, as
// taking them off its allow-list does: their next request is told so,
// and their sessions end.
func (a *Auth) Refuse(user string) {
	a.mu.Lock()
	a.refused[user] = true
	a.mu.Unlock()
}

// CheckCSRF compares the header X-CSRF-Token, else the form field csrf,
// with the session's token.
func (a *Auth) CheckCSRF(r *http.Request) bool {
	s, ok := a.session(r)
	if !ok {
		return false
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.FormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// CSRFToken is the session's token.
func (a *Auth) CSRFToken(r *http.Request) string {
	s, _ := a.session(r)
	return s.csrf
}

// Event is one event of the chat's stream, as the page reads it.
type Event struct {
	ID       int64    `json:"id"`
	Kind     string   `json:"kind"`
	Text     string   `json:"text"`
	Approval string   `json:"approval"`
	Code     string   `json:"code"`
	File     string   `json:"file"`
	Name     string   `json:"name"`
	Files    []string `json:"files"`
	Voice    string   `json:"voice"`
	Ref      string   `json:"ref"`
	Replaces string   `json:"replaces"`
	Version  int      `json:"v"`
	On       bool     `json:"on"`
}

// Person is a signed-in person's page: its requests and its stream.
type Person struct {
	User          string
	Cookie, CSRF  string
	HTTP          *http.Client
	mu            sync.Mutex
	base          string
	events        []Event
	last          int64
	streams       int // streams opened, reconnections included
	cancel        context.CancelFunc
	done          chan struct{}
	sent          map[string]url.Values
	StreamHeaders http.Header // the last stream's response headers
}

// NewPerson signs user in on a and returns their page, not connected.
func NewPerson(a *Auth, user string) *Person {
	cookie, csrf := a.SignIn(user, false)
	return &Person{User: user, Cookie: cookie, CSRF: csrf, HTTP: &http.Client{Timeout: 30 * time.Second}, sent: map[string]url.Values{}}
}

// Request is a request of the person's page: with their cookie, and
// (for a POST) their CSRF token.
func (p *Person) Request(method, base, path string, body io.Reader) *http.Request {
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		panic(err)
	}
	req.AddCookie(&http.Cookie{Name: Cookie, Value: p.Cookie})
	if method == http.MethodPost {
		req.Header.Set("X-CSRF-Token", p.CSRF)
	}
	return req
}

// Connect opens the chat's stream on the server at base (ending the one
// open before), resuming after the last kept event read so far, and
// keeps it open, reconnecting after a drop, until Close or the next
// Connect. It returns once the stream has answered.
func (p *Person) Connect(t testing.TB, base string) {
	t.Helper()
	p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	opened := make(chan error, 1)
	p.mu.Lock()
	p.base, p.cancel, p.done = base, cancel, done
	p.mu.Unlock()
	go func() {
		defer close(done)
		first := true
		for ctx.Err() == nil {
			err := p.read(ctx, base, func(err error) {
				if first {
					opened <- err
					first = false
				}
			})
			if first {
				opened <- err
				first = false
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	if err := <-opened; err != nil {
		t.Fatalf("%s: the stream did not open: %v", p.User, err)
	}
}

// Close ends the stream.
func (p *Person) Close() {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// read reads one connection of the stream until it ends.
func (p *Person) read(ctx context.Context, base string, opened func(error)) error {
	req := p.Request(http.MethodGet, base, "/chat/stream", nil).WithContext(ctx)
	p.mu.Lock()
	if p.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(p.last, 10))
	}
	p.mu.Unlock()
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("stream: %s: %s", resp.Status, b)
	}
	p.mu.Lock()
	p.streams++
	p.StreamHeaders = resp.Header
	p.mu.Unlock()
	opened(nil)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data string
	var id int64
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				var e Event
				if err := json.Unmarshal([]byte(data), &e); err == nil {
					p.mu.Lock()
					p.events = append(p.events, e)
					if id > 0 {
						p.last = id
					}
					p.mu.Unlock()
				}
			}
			data, id = "", 0
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		}
	}
	return sc.Err()
}

// Events are the events read so far, in order.
func (p *Person) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.events...)
}

// Streams counts the stream's connections so far.
func (p *Person) Streams() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streams
}

// Answers are the bot's messages as the page shows them: parts and
// questions, a draft as its newest text until its answer replaces it.
func (p *Person) Answers() []string {
	var out []string
	slot := map[string]int{}
	ver := map[string]int{}
	for _, e := range p.Events() {
		switch e.Kind {
		case "draft":
			i, ok := slot[e.Ref]
			if !ok {
				i = len(out)
				slot[e.Ref] = i
				out = append(out, "")
			}
			if e.Version >= ver[e.Ref] {
				ver[e.Ref] = e.Version
				out[i] = e.Text
			}
		case "answer":
			if i, ok := slot[e.Replaces]; ok && e.Replaces != "" {
				out[i] = e.Text
				delete(slot, e.Replaces)
				continue
			}
			out = append(out, e.Text)
		case "ask":
			out = append(out, e.Text)
		}
	}
	return out
}

// Post sends a form (multipart when files are given: field → name →
// content) and returns the status and the sentence answered.
func (p *Person) Post(base, route string, form url.Values, files map[string]map[string][]byte) (int, string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, vs := range form {
		for _, v := range vs {
			mw.WriteField(k, v)
		}
	}
	for field, fs := range files {
		for name, content := range fs {
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, name))
			// As a browser does: the type its name says.
			ctype := mime.TypeByExtension(path.Ext(name))
			switch {
			case field == "voice":
				ctype = "audio/webm"
			case ctype == "":
				ctype = "application/octet-stream"
			}
			h.Set("Content-Type", ctype)
			w, _ := mw.CreatePart(h)
			w.Write(content)
		}
	}
	mw.Close()
	req := p.Request(http.MethodPost, base, route, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := p.HTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var ans struct {
		Message string `json:"message"`
	}
	json.NewDecoder(resp.Body).Decode(&ans)
	return resp.StatusCode, ans.Message, nil
}

// Send sends a message from the page (with files, name → content) and
// returns its id; the server must take it (202).
func (p *Person) Send(t testing.TB, base, text string, files map[string][]byte) string {
	t.Helper()
	id := random()
	p.SendAs(t, base, id, text, files)
	return id
}

// SendAs sends a message under id: the same id again is a retry.
func (p *Person) SendAs(t testing.TB, base, id, text string, files map[string][]byte) {
	t.Helper()
	form := url.Values{"id": {id}, "text": {text}}
	var fs map[string]map[string][]byte
	if files != nil {
		fs = map[string]map[string][]byte{"file": files}
	}
	status, msg, err := p.Post(base, "/chat/send", form, fs)
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("%s: send %q: %d %q %v", p.User, text, status, msg, err)
	}
}

// LastAsk is the last question shown, if any.
func (p *Person) LastAsk() (Event, bool) {
	ev := p.Events()
	for i := len(ev) - 1; i >= 0; i-- {
		if ev[i].Kind == "ask" {
			return ev[i], true
		}
	}
	return Event{}, false
}

// Press presses choice ("approve" or "deny") on approval and returns the
// status and sentence answered.
func (p *Person) Press(base, approval, choice string) (int, string, error) {
	return p.Post(base, "/chat/answer", url.Values{"id": {random()}, "approval": {approval}, "choice": {choice}}, nil)
}

// Download gets a file of the chat's page.
func (p *Person) Download(base, name string) (int, []byte, http.Header, error) {
	resp, err := p.HTTP.Do(p.Request(http.MethodGet, base, "/chat/file?name="+url.QueryEscape(name), nil))
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// Uploads are the files offered on the page, by the name they were sent
// as, downloaded.
func (p *Person) Uploads() map[string][]byte {
	out := map[string][]byte{}
	p.mu.Lock()
	base := p.base
	p.mu.Unlock()
	for _, e := range p.Events() {
		if e.Kind != "file" {
			continue
		}
		if status, b, _, err := p.Download(base, e.File); err == nil && status == http.StatusOK {
			out[e.Name] = b
		}
	}
	return out
}
