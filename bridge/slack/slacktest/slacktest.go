// Package slacktest is a fake Slack for tests that drive the real slack-go
// client: the Web API (point the client's API URL at Server.APIURL), a
// Socket Mode websocket handed out by apps.connections.open, and response
// URLs for slash commands. It also signs Events API requests.
package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	up  websocket.Upgrader

	mu       sync.Mutex
	changed  chan struct{}
	calls    []Call
	failures map[string][]Failure
	ts       int
	conn     *websocket.Conn
	writeMu  sync.Mutex
	acks     []string
	conns    int
	closed   bool
}

// NewServer starts a fake Slack on 127.0.0.1, closed when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{changed: make(chan struct{}), failures: map[string][]Failure{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.api)
	mux.HandleFunc("/socket", s.socket)
	mux.HandleFunc("/response/", s.response)
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
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	s.srv.Close()
}

// ResponseURL returns a response URL for a slash command.
func (s *Server) ResponseURL(id string) string { return s.URL + "/response/" + id }

// Fail queues failures answered, in order, to the next calls of method.
func (s *Server) Fail(method string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f...)
}

// Calls returns the calls of method received so far ("" for all).
func (s *Server) Calls(method string) []Call {
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
	s.record(c)

	s.mu.Lock()
	var fail *Failure
	if q := s.failures[method]; len(q) > 0 {
		fail = &q[0]
		s.failures[method] = q[1:]
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if fail != nil {
		if fail.RetryAfter != "" {
			w.Header().Set("Retry-After", fail.RetryAfter)
		}
		if fail.Status != 0 {
			w.WriteHeader(fail.Status)
			fmt.Fprint(w, `{"ok":false,"error":"fake failure"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": fail.Error})
		return
	}
	if !strings.HasPrefix(c.Token, "xox") && !strings.HasPrefix(c.Token, "xapp-") {
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	switch method {
	case "auth.test":
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "https://test.slack.com/", "team": "Test",
			"user": "loadout", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID})
	case "apps.connections.open":
		if !strings.HasPrefix(c.Token, "xapp-") {
			json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.URL, "http") + "/socket"})
	case "chat.postMessage", "chat.update", "chat.postEphemeral":
		s.mu.Lock()
		s.ts++
		ts := fmt.Sprintf("1700000000.%06d", s.ts)
		s.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Params["channel"], "ts": ts, "message_ts": ts})
	default:
		json.NewEncoder(w).Encode(map[string]any{"ok": true})
	}
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
			s.acks = append(s.acks, ack.EnvelopeID)
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
	s.WaitConnected(t)
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	env := map[string]any{"envelope_id": envelopeID, "type": typ, "payload": payload,
		"accepts_response_payload": typ != "events_api", "retry_attempt": retryAttempt}
	if err := s.write(conn, env); err != nil {
		t.Fatalf("slacktest: sending envelope: %v", err)
	}
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
