// Package telegramtest is a fake Telegram Bot API server for tests. It
// speaks the wire format the real client library uses (form-encoded POSTs
// to /bot<token>/<method>, JSON answers), queues updates for getUpdates
// with real long polling and offset confirmation, records every message,
// chat action and command menu it receives, checks HTML formatting the way
// Telegram does, and can be scripted to fail or pause a method.
//
// What every platform's fake needs besides the platform — the record of
// the calls, the holds, the wait on either — is bridgetest's kit; this
// package keeps what Telegram does.
package telegramtest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// Token is the bot token the server accepts.
const Token = "123456:TEST-token"

// Bot identity reported by getMe.
const (
	BotID       int64 = 777000
	BotUserName       = "loadout_bot"
)

// Call is any request the server received, accepted or not.
type Call struct {
	Method string
	Params url.Values
}

// Server is the fake Bot API. It is safe for concurrent use.
type Server struct {
	// URL is the server's base URL.
	URL string

	srv *httptest.Server
	// closing ends when the test does and the server closes.
	closing context.Context
	close   context.CancelFunc

	// calls are every request, in order.
	calls bridgetest.Recorder[Call]
	// uploads are the files the bot sent.
	uploads bridgetest.Recorder[Upload]
	// gate holds calls by method (Pause, Hold). Its Signal is the
	// server's: the gate notifies it as a held call comes and goes, and
	// notify at every other change, so WaitFor and a long poll wake at
	// any of them.
	gate bridgetest.Gate

	// latency delays every answer (SetLatency).
	latency atomic.Int64

	mu           sync.Mutex
	nextID       int
	nextMsg      int
	nextCallback int
	updates      []json.RawMessage
	ids          []int
	pushed       map[int][]byte    // every update Push queued, by id
	resend       []json.RawMessage // delivered again by the next getUpdates
	sent         []Sent
	files        map[string]File // by file_id
	fails        map[string][]failure
	webhook      string // the URL setWebhook set, until deleteWebhook
	conns        atomic.Int32
}

// New starts a server on 127.0.0.1, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{nextID: 1000, nextMsg: 1, fails: map[string][]failure{}}
	s.closing, s.close = context.WithCancel(context.Background())
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.close()
		s.srv.Close()
	})
	return s
}

// Conns returns how many connections clients have opened to the server.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Endpoint is the api_endpoint format pointing at this server.
func (s *Server) Endpoint() string { return s.URL + "/bot%s/%s" }

// Calls returns every call of method ("" for all), in order.
func (s *Server) Calls(method string) []Call {
	return s.calls.Filter(func(c Call) bool { return method == "" || c.Method == method })
}

// WaitFor waits until cond holds, checking it after every change of the
// server (a request, an update queued, a message sent or edited, a held
// call let go) and on a short tick, since cond may watch something
// besides this server (a metric, a database row); it fails the test
// after bridgetest.Wait.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, "telegramtest: "+what, &s.gate.Signal, cond)
}

// SetLatency makes the server answer every request d after it arrives
// (and is recorded), as a distant Bot API does.
func (s *Server) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// notify wakes WaitFor and long polls.
func (s *Server) notify() { s.gate.Notify() }

// changed is closed at the next notify.
func (s *Server) changed() <-chan struct{} { return s.gate.C() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, isFile := strings.CutPrefix(r.URL.Path, "/file/bot"+Token+"/"); isFile {
		s.download(w, r, rest)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/bot")
	token, method, ok := strings.Cut(path, "/")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			writeErr(w, 400, "Bad Request: "+err.Error(), 0)
			return
		}
		// The form ends before a chunked body does: read the rest, so the
		// server watches the connection and a held call sees its client
		// give up.
		io.Copy(io.Discard, r.Body)
		r.PostForm = r.MultipartForm.Value
	} else if err := r.ParseForm(); err != nil {
		writeErr(w, 400, "Bad Request: "+err.Error(), 0)
		return
	}
	fail, release, held := s.arrive(Call{Method: method, Params: r.PostForm})
	if !ok || token != Token {
		writeErr(w, 401, "Unauthorized", 0)
		return
	}
	if held && !s.wait(r, method, release) {
		return
	}
	if d := time.Duration(s.latency.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	if fail != nil {
		writeErr(w, fail.code, fail.desc, fail.retryAfter)
		return
	}
	switch method {
	case "getMe":
		writeOK(w, map[string]any{"id": BotID, "is_bot": true, "first_name": "loadout", "username": BotUserName})
	case "getUpdates":
		s.getUpdates(w, r)
	case "sendMessage":
		s.sendMessage(w, r)
	case "editMessageText":
		s.editMessageText(w, r)
	case "getFile":
		s.getFile(w, r)
	case "sendDocument", "sendPhoto", "sendVoice":
		s.upload(w, r, method)
	case "setWebhook", "deleteWebhook":
		s.setWebhook(w, r)
	case "sendChatAction", "setMyCommands", "answerCallbackQuery":
		writeOK(w, true)
	default:
		writeErr(w, 404, "Not Found", 0)
	}
}

func writeOK(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func writeErr(w http.ResponseWriter, code int, desc string, retryAfter int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body := map[string]any{"ok": false, "error_code": code, "description": desc}
	if retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": retryAfter}
	}
	json.NewEncoder(w).Encode(body)
}
