// Package slacktest is a fake Slack for tests that drive the real slack-go
// client: the Web API (point the client's API URL at Server.APIURL), a
// Socket Mode websocket handed out by apps.connections.open, and response
// URLs for slash commands. It also signs Events API requests. To stage a
// crash it can hold a method's calls (Hold, HoldReply, Release), lose
// Socket Mode acknowledgements (LoseAcks) and deliver unacknowledged
// envelopes again (Redeliver), as Slack does.
package slacktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Identity of the fake workspace and bot.
const (
	TeamID    = "T0001"
	BotUserID = "UBOT"
	BotID     = "B0001"
)

// Wait is how long the Wait helpers wait before failing a test.
const Wait = 10 * time.Second

// Call is one request the fake received.
type Call struct {
	// Method is the Web API method ("chat.postMessage"), or "response_url".
	Method string
	// Token is the token sent, as a bearer header or a form field.
	Token string
	// Params are the form or JSON fields, as strings.
	Params map[string]string
}

// Failure is a queued error answer for a method.
type Failure struct {
	Status int
	// RetryAfter is sent as the Retry-After header when not empty.
	RetryAfter string
	// Error, with Status 0, answers {"ok":false,"error":Error}.
	Error string
}

// Server is a fake Slack. It is safe for concurrent use.
type Server struct {
	// URL is the server's base URL.
	URL string
	// APIURL is the Web API base to configure in the client.
	APIURL string

	srv *httptest.Server
	// acting is held while a call is acted on and recorded, and by
	// Messages and Calls: a message a test sees has its call recorded.
	acting sync.RWMutex
	up     websocket.Upgrader

	mu        sync.Mutex
	changed   chan struct{}
	quit      chan struct{}
	calls     []Call
	failures  map[string][]Failure
	ts        int
	conn      *websocket.Conn
	writeMu   sync.Mutex
	acks      []string
	conns     int
	closed    bool
	holds     map[string]*hold
	waiting   map[string]int
	abandoned []Call
	reactions map[string]bool   // "channel/ts/name" on a message now
	messages  map[string]string // "channel/ts": the text of a message the bot posted
	files     map[string]File   // shared by people, by id
	staged    map[string][]byte // uploaded by the bot, not yet shared
	uploads   []Upload
	downloads int
	envelopes []envelope // sent over Socket Mode, in order
	lose      int        // acknowledgements still to lose
	lost      []string
}

// hold makes calls of a method wait until released.
type hold struct {
	after   int  // calls still let through
	reply   bool // Slack acts on the call and holds only its answer
	release chan struct{}
}

// envelope is a Socket Mode envelope as sent, kept for Redeliver.
type envelope struct {
	id      string
	typ     string
	payload any
	attempt int
}

// NewServer starts a fake Slack on 127.0.0.1, closed when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{changed: make(chan struct{}), quit: make(chan struct{}), failures: map[string][]Failure{},
		holds: map[string]*hold{}, waiting: map[string]int{}, reactions: map[string]bool{}, messages: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.api)
	mux.HandleFunc("/socket", s.socket)
	mux.HandleFunc("/response/", s.response)
	mux.HandleFunc("/files/", s.download)
	mux.HandleFunc("/upload/", s.upload)
	// Slack's client sends Origin: https://api.slack.com.
	s.up.CheckOrigin = func(*http.Request) bool { return true }
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.APIURL = s.srv.URL + "/api/"
	t.Cleanup(s.close)
	return s
}

func (s *Server) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	close(s.quit) // held calls give up, so Close does not wait for them
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	s.srv.Close()
}

// Message returns the current text of a message the bot posted (after
// its updates), and whether there is one.
func (s *Server) Message(channel, ts string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	text, ok := s.messages[channel+"/"+ts]
	return text, ok
}

// Messages returns the current texts of the bot's messages in channel,
// in the order they were posted.
func (s *Server) Messages(channel string) []string {
	s.acting.RLock()
	defer s.acting.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for key := range s.messages {
		if c, _, _ := strings.Cut(key, "/"); c == channel {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys) // the ts are of one width
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = s.messages[k]
	}
	return out
}

// TSOf is the ts of the bot's message in channel whose text is text, or
// "".
func (s *Server) TSOf(channel, text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, t := range s.messages {
		if c, ts, _ := strings.Cut(key, "/"); c == channel && t == text {
			return ts
		}
	}
	return ""
}

// ResponseURL returns a response URL for a slash command.
func (s *Server) ResponseURL(id string) string { return s.URL + "/response/" + id }

// Fail queues failures answered, in order, to the next calls of method.
func (s *Server) Fail(method string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f...)
}

// Hold lets the next after calls of the Web API method through and
// makes later ones wait, before Slack acts on them, until Release or
// until their client gives up. A call its client gave up on is not
// recorded in Calls (Slack never saw it) but in Abandoned. Holding a
// method already held changes only how many calls go through.
func (s *Server) Hold(method string, after int) { s.hold(method, after, false) }

// HoldReply is Hold for calls that Slack acts on (a held chat.postMessage
// is posted and recorded in Calls) while their answer waits: the client
// cannot tell whether the call went through.
func (s *Server) HoldReply(method string, after int) { s.hold(method, after, true) }

func (s *Server) hold(method string, after int, reply bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.holds[method]
	if !ok {
		h = &hold{release: make(chan struct{})}
		s.holds[method] = h
	}
	h.after, h.reply = after, reply
}

// Release lets the held calls of method go on, and later ones through.
func (s *Server) Release(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.holds[method]; ok {
		close(h.release)
		delete(s.holds, method)
	}
}

// Waiting returns how many calls of method are held right now.
func (s *Server) Waiting(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[method]
}

// Abandoned returns the held calls of method ("" for all) whose client
// gave up before Slack acted on them.
func (s *Server) Abandoned(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.abandoned {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// React puts a reaction on a message as if an earlier process had added
// it and died before taking it off.
func (s *Server) React(channel, ts, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reactions[channel+"/"+ts+"/"+name] = true
}

// Reactions returns the names of the reactions on the message at ts in
// channel, as reactions.add and reactions.remove left them.
func (s *Server) Reactions(channel, ts string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	prefix := channel + "/" + ts + "/"
	for k := range s.reactions {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, name)
		}
	}
	return out
}

// Calls returns the calls of method received so far ("" for all).
func (s *Server) Calls(method string) []Call {
	s.acting.RLock()
	defer s.acting.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until at least n calls of method arrived and returns
// all of them; it fails the test after Wait.
func (s *Server) WaitCalls(t testing.TB, method string, n int) []Call {
	t.Helper()
	var got []Call
	s.waitFor(t, fmt.Sprintf("%d calls of %s", n, method), func() bool {
		got = s.Calls(method)
		return len(got) >= n
	})
	return got
}

// WaitAck waits until the Socket Mode envelope was acknowledged.
func (s *Server) WaitAck(t testing.TB, envelopeID string) {
	t.Helper()
	s.waitFor(t, "ack of envelope "+envelopeID, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, a := range s.acks {
			if a == envelopeID {
				return true
			}
		}
		return false
	})
}

// WaitFor waits until cond holds, checking after every change the server
// sees; it fails the test after Wait.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	s.waitFor(t, what, cond)
}

// Acks returns how many times the envelope was acknowledged.
func (s *Server) Acks(envelopeID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.acks {
		if a == envelopeID {
			n++
		}
	}
	return n
}

// WaitConnected waits until a Socket Mode client is connected.
func (s *Server) WaitConnected(t testing.TB) {
	t.Helper()
	s.waitFor(t, "a socket mode connection", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.conn != nil
	})
}

// Connections returns how many Socket Mode connections were opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

func (s *Server) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(Wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("slacktest: timed out waiting for %s", what)
		}
	}
}

// notify wakes waiters; s.mu must be held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
	s.notify()
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	c := Call{Method: method, Token: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), Params: params(r)}
	if tok, ok := c.Params["token"]; ok { // form posts carry the token as a field
		c.Token = tok
		delete(c.Params, "token")
	}
	s.mu.Lock()
	var held, reply bool
	var release chan struct{}
	if h := s.holds[method]; h != nil {
		if h.after > 0 {
			h.after--
		} else {
			held, reply, release = true, h.reply, h.release
		}
	}
	s.mu.Unlock()
	if held && !reply && !s.wait(r, method, release) {
		s.mu.Lock()
		s.abandoned = append(s.abandoned, c)
		s.notify()
		s.mu.Unlock()
		return
	}
	// Acted on first, then recorded: a test that saw the call sees
	// what it did (a posted message's ts).
	var out bytes.Buffer
	s.acting.Lock()
	status := s.answer(w.Header(), &out, c)
	s.record(c)
	s.acting.Unlock()
	if held && reply && !s.wait(r, method, release) {
		return // acted on; the answer is lost
	}
	w.WriteHeader(status)
	w.Write(out.Bytes())
}

// wait holds a call until release is closed; it reports false when the
// client gave up first or the server is closing.
func (s *Server) wait(r *http.Request, method string, release <-chan struct{}) bool {
	s.mu.Lock()
	s.waiting[method]++
	s.notify()
	s.mu.Unlock()
	ok := false
	select {
	case <-release:
		ok = r.Context().Err() == nil
	case <-r.Context().Done():
	case <-s.quit:
	}
	s.mu.Lock()
	s.waiting[method]--
	s.notify()
	s.mu.Unlock()
	return ok
}

// answer acts on one Web API call and writes its answer to out.
func (s *Server) answer(hd http.Header, out *bytes.Buffer, c Call) int {
	s.mu.Lock()
	var fail *Failure
	if q := s.failures[c.Method]; len(q) > 0 {
		fail = &q[0]
		s.failures[c.Method] = q[1:]
	}
	s.mu.Unlock()
	hd.Set("Content-Type", "application/json")
	enc := json.NewEncoder(out)
	if fail != nil {
		if fail.RetryAfter != "" {
			hd.Set("Retry-After", fail.RetryAfter)
		}
		if fail.Status != 0 {
			fmt.Fprint(out, `{"ok":false,"error":"fake failure"}`)
			return fail.Status
		}
		enc.Encode(map[string]any{"ok": false, "error": fail.Error})
		return http.StatusOK
	}
	if !strings.HasPrefix(c.Token, "xox") && !strings.HasPrefix(c.Token, "xapp-") {
		enc.Encode(map[string]any{"ok": false, "error": "not_authed"})
		return http.StatusOK
	}
	switch c.Method {
	case "auth.test":
		enc.Encode(map[string]any{"ok": true, "url": "https://test.slack.com/", "team": "Test",
			"user": "loadout", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID})
	case "apps.connections.open":
		if !strings.HasPrefix(c.Token, "xapp-") {
			enc.Encode(map[string]any{"ok": false, "error": "invalid_auth"})
			return http.StatusOK
		}
		enc.Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.URL, "http") + "/socket"})
	case "files.getUploadURLExternal":
		s.mu.Lock()
		s.ts++
		id := fmt.Sprintf("FUP%d", s.ts)
		s.mu.Unlock()
		enc.Encode(map[string]any{"ok": true, "upload_url": s.URL + "/upload/" + id, "file_id": id})
	case "files.completeUploadExternal":
		var fs []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		}
		json.Unmarshal([]byte(c.Params["files"]), &fs)
		s.mu.Lock()
		var out []map[string]any
		for _, f := range fs {
			content, ok := s.staged[f.ID]
			if !ok {
				s.mu.Unlock()
				enc.Encode(map[string]any{"ok": false, "error": "file_not_found"})
				return http.StatusOK
			}
			delete(s.staged, f.ID)
			s.uploads = append(s.uploads, Upload{Channel: c.Params["channel_id"], Thread: c.Params["thread_ts"], Title: f.Title, Content: content})
			out = append(out, map[string]any{"id": f.ID, "title": f.Title})
		}
		s.notify()
		s.mu.Unlock()
		enc.Encode(map[string]any{"ok": true, "files": out})
	case "chat.update":
		// As Slack does: the message keeps its ts; an unknown one is an
		// error.
		key := c.Params["channel"] + "/" + c.Params["ts"]
		s.mu.Lock()
		_, ok := s.messages[key]
		if ok {
			s.messages[key] = c.Params["text"]
			s.notify()
		}
		s.mu.Unlock()
		if !ok {
			enc.Encode(map[string]any{"ok": false, "error": "message_not_found"})
			return http.StatusOK
		}
		enc.Encode(map[string]any{"ok": true, "channel": c.Params["channel"], "ts": c.Params["ts"], "text": c.Params["text"]})
	case "chat.postMessage", "chat.postEphemeral":
		s.mu.Lock()
		s.ts++
		ts := fmt.Sprintf("1700000000.%06d", s.ts)
		if c.Method == "chat.postMessage" {
			s.messages[c.Params["channel"]+"/"+ts] = c.Params["text"]
		}
		s.mu.Unlock()
		enc.Encode(map[string]any{"ok": true, "channel": c.Params["channel"], "ts": ts, "message_ts": ts})
	case "reactions.add", "reactions.remove":
		// As Slack does, a reaction is on a message once.
		key := c.Params["channel"] + "/" + c.Params["timestamp"] + "/" + c.Params["name"]
		s.mu.Lock()
		on := s.reactions[key]
		if c.Method == "reactions.add" {
			s.reactions[key] = true
		} else {
			delete(s.reactions, key)
		}
		s.notify()
		s.mu.Unlock()
		switch {
		case c.Method == "reactions.add" && on:
			enc.Encode(map[string]any{"ok": false, "error": "already_reacted"})
		case c.Method == "reactions.remove" && !on:
			enc.Encode(map[string]any{"ok": false, "error": "no_reaction"})
		default:
			enc.Encode(map[string]any{"ok": true})
		}
	default:
		enc.Encode(map[string]any{"ok": true})
	}
	return http.StatusOK
}

func (s *Server) response(w http.ResponseWriter, r *http.Request) {
	c := Call{Method: "response_url", Params: params(r)}
	c.Params["id"] = strings.TrimPrefix(r.URL.Path, "/response/")
	s.record(c)
	fmt.Fprint(w, "ok")
}

// params reads a form or JSON body into strings.
func params(r *http.Request) map[string]string {
	out := map[string]string{}
	body, _ := io.ReadAll(r.Body)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			for k, v := range m {
				if s, ok := v.(string); ok {
					out[k] = s
				} else {
					b, _ := json.Marshal(v)
					out[k] = string(b)
				}
			}
		}
		return out
	}
	vals, _ := url.ParseQuery(string(body))
	for k := range vals {
		out[k] = vals.Get(k)
	}
	for k := range r.URL.Query() {
		out[k] = r.URL.Query().Get(k)
	}
	return out
}

// socket accepts a Socket Mode connection, greets it with hello, pings it
// and records acknowledgements.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	conn, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	if old := s.conn; old != nil {
		old.Close()
	}
	s.conn = conn
	s.conns++
	s.notify()
	s.mu.Unlock()
	s.write(conn, map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]string{"app_id": "A0001"}})
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)) != nil {
				return
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		defer close(done)
		defer conn.Close()
		for {
			var ack struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if err := conn.ReadJSON(&ack); err != nil {
				s.mu.Lock()
				if s.conn == conn {
					s.conn = nil
				}
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			if s.lose > 0 {
				s.lose--
				s.lost = append(s.lost, ack.EnvelopeID)
			} else {
				s.acks = append(s.acks, ack.EnvelopeID)
			}
			s.notify()
			s.mu.Unlock()
		}
	}()
}

func (s *Server) write(conn *websocket.Conn, v any) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return conn.WriteJSON(v)
}

// Send delivers a Socket Mode envelope of type typ ("events_api",
// "slash_commands") with payload, waiting for a connection first.
func (s *Server) Send(t testing.TB, envelopeID, typ string, payload any, retryAttempt int) {
	t.Helper()
	s.send(t, envelope{id: envelopeID, typ: typ, payload: payload, attempt: retryAttempt})
}

func (s *Server) send(t testing.TB, e envelope) {
	t.Helper()
	s.WaitConnected(t)
	s.mu.Lock()
	conn := s.conn
	s.envelopes = append(s.envelopes, e)
	s.mu.Unlock()
	env := map[string]any{"envelope_id": e.id, "type": e.typ, "payload": e.payload,
		"accepts_response_payload": e.typ != "events_api", "retry_attempt": e.attempt}
	if e.attempt > 0 {
		env["retry_reason"] = "timeout"
	}
	if err := s.write(conn, env); err != nil {
		t.Fatalf("slacktest: sending envelope: %v", err)
	}
}

// LoseAcks makes the next n Socket Mode acknowledgements get lost on the
// way: Slack never learns of them, and Redeliver sends their envelopes
// again.
func (s *Server) LoseAcks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = n
}

// WaitAckLost waits until the acknowledgement of the envelope was sent
// and lost (see LoseAcks).
func (s *Server) WaitAckLost(t testing.TB, envelopeID string) {
	t.Helper()
	s.waitFor(t, "the lost ack of envelope "+envelopeID, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, a := range s.lost {
			if a == envelopeID {
				return true
			}
		}
		return false
	})
}

// Redeliver sends again, with the next retry_attempt, every envelope that
// was not acknowledged, as Slack does when an ack does not arrive in
// time, and returns their ids. Each keeps its envelope id and payload.
func (s *Server) Redeliver(t testing.TB) []string {
	t.Helper()
	s.mu.Lock()
	acked := map[string]bool{}
	for _, a := range s.acks {
		acked[a] = true
	}
	var again []envelope
	seen := map[string]bool{}
	for i := len(s.envelopes) - 1; i >= 0; i-- { // the latest attempt of each
		e := s.envelopes[i]
		if !acked[e.id] && !seen[e.id] {
			seen[e.id] = true
			again = append([]envelope{e}, again...)
		}
	}
	s.mu.Unlock()
	var ids []string
	for _, e := range again {
		e.attempt++
		s.send(t, e)
		ids = append(ids, e.id)
	}
	return ids
}

// Disconnect asks the connected client to reconnect, as Slack does.
func (s *Server) Disconnect(t testing.TB) {
	t.Helper()
	s.WaitConnected(t)
	s.mu.Lock()
	conn := s.conn
	s.conn = nil // later envelopes wait for the new connection
	s.mu.Unlock()
	s.write(conn, map[string]any{"type": "disconnect", "reason": "refresh_requested"})
}

// Event is an inner event of the Events API.
type Event map[string]any

// DM is a direct message from user in channel ("D…") with timestamp ts.
func DM(channel, user, text, ts string) Event {
	return Event{"type": "message", "channel": channel, "channel_type": "im", "user": user, "text": text, "ts": ts, "event_ts": ts}
}

// Mention is an app_mention in channel; threadTS is "" at the top level.
func Mention(channel, user, text, ts, threadTS string) Event {
	e := Event{"type": "app_mention", "channel": channel, "user": user, "text": text, "ts": ts, "event_ts": ts}
	if threadTS != "" {
		e["thread_ts"] = threadTS
	}
	return e
}

// Callback wraps an inner event in an event_callback with eventID.
func Callback(eventID string, e Event) map[string]any {
	return map[string]any{"token": "legacy", "team_id": TeamID, "api_app_id": "A0001", "type": "event_callback",
		"event": e, "event_id": eventID, "event_time": time.Now().Unix()}
}

var triggers atomic.Int64

// SlashCommand is the payload of "/loadout <text>" typed by user in
// channel, answered through responseURL. Each has its own trigger_id, as
// each invocation on Slack does.
func SlashCommand(channel, user, text, responseURL string) map[string]string {
	return map[string]string{"command": "/loadout", "text": text, "team_id": TeamID, "channel_id": channel,
		"user_id": user, "user_name": "someone", "response_url": responseURL,
		"trigger_id": fmt.Sprintf("1.2.%d", triggers.Add(1)), "api_app_id": "A0001"}
}

// BlockAction is the payload of a block_actions interaction: user
// pressed the button actionID (with value) under the bot's message ts in
// channel (in thread, when not ""), whose text was text.
func BlockAction(user, channel, thread, ts, text, actionID, value string) map[string]any {
	container := map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false}
	msg := map[string]any{"type": "message", "ts": ts, "text": text, "user": BotUserID}
	if thread != "" {
		container["thread_ts"] = thread
		msg["thread_ts"] = thread
	}
	return map[string]any{
		"type": "block_actions", "trigger_id": fmt.Sprintf("9.8.%d", triggers.Add(1)), "api_app_id": "A0001",
		"team": map[string]any{"id": TeamID}, "user": map[string]any{"id": user, "team_id": TeamID},
		"channel": map[string]any{"id": channel}, "container": container, "message": msg,
		"actions": []map[string]any{{"type": "button", "action_id": actionID, "block_id": "loadout_approval", "value": value,
			"action_ts": fmt.Sprintf("1700000001.%06d", triggers.Add(1))}},
	}
}

// Interactivity encodes an interaction payload as Slack posts it to an
// interactivity request URL.
func Interactivity(payload map[string]any) []byte {
	b, _ := json.Marshal(payload)
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

// Form encodes a slash command payload as Slack posts it.
func Form(cmd map[string]string) []byte {
	v := url.Values{}
	for k, x := range cmd {
		v.Set(k, x)
	}
	return []byte(v.Encode())
}

// Sign returns request headers carrying Slack's v0 signature of body at
// time at, made with secret.
func Sign(secret string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// File is a file a person shares with the bot.
type File struct {
	Name    string
	MIME    string
	Content []byte
	// Type is Slack's filetype ("slack_audio" for a clip recorded in
	// Slack); Seconds, a recording's stated length.
	Type    string
	Seconds int
	// Stated is the size the event states; 0 states the content's.
	Stated int
}

// Upload is a file the bot shared in a conversation.
type Upload struct {
	Channel, Thread, Title string
	Content                []byte
}

// Downloads counts the bot's downloads of shared files.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// Uploads returns the files the bot shared.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload(nil), s.uploads...)
}

// DMWithFile is a direct message sharing f, as Slack sends it (subtype
// file_share); the file downloads from this server with the bot token.
func (s *Server) DMWithFile(channel, user, text, ts string, f File) Event {
	s.mu.Lock()
	if s.files == nil {
		s.files = map[string]File{}
	}
	id := fmt.Sprintf("F%d", len(s.files)+1)
	s.files[id] = f
	s.mu.Unlock()
	e := DM(channel, user, text, ts)
	e["subtype"] = "file_share"
	size := f.Stated
	if size == 0 {
		size = len(f.Content)
	}
	file := map[string]any{"id": id, "name": f.Name, "mimetype": f.MIME, "size": size,
		"url_private_download": s.URL + "/files/" + id + "/" + f.Name}
	if f.Type != "" {
		file["filetype"] = f.Type
	}
	if f.Seconds > 0 {
		file["duration_ms"] = f.Seconds * 1000
	}
	e["files"] = []map[string]any{file}
	return e
}

// download serves a shared file to the bot's token only.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer xoxb-") {
		http.Error(w, "not authed", http.StatusForbidden)
		return
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/files/"), "/")
	s.mu.Lock()
	f, ok := s.files[id]
	s.downloads++
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(f.Content)
}

// upload takes a file's bytes at its upload URL, as a multipart "file".
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	f, _, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return
	}
	content, _ := io.ReadAll(f)
	s.mu.Lock()
	if s.staged == nil {
		s.staged = map[string][]byte{}
	}
	s.staged[id] = content
	s.mu.Unlock()
	fmt.Fprint(w, "OK - "+strconv.Itoa(len(content)))
}
