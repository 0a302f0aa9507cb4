// Package slacktest is a fake Slack for tests that drive the real slack-go
// client: the Web API (point the client's API URL at Server.APIURL), a
// Socket Mode websocket handed out by apps.connections.open, and response
// URLs for slash commands. It also signs Events API requests. To stage a
// crash it can hold a method's calls (Hold, HoldReply, Release), lose
// Socket Mode acknowledgements (LoseAcks) and deliver unacknowledged
// envelopes again (Redeliver), as Slack does.
//
// What every platform's fake needs besides the platform's own behaviour
// comes from the kit in bridge/bridgetest: the calls are kept by a
// Recorder, held by a Gate, and waited for with its WaitFor. The fake is
// in parts: the Web API (webapi.go), its holds (holds.go), Socket Mode
// (socket.go), files (files.go), and the payloads Slack delivers over
// the Events API and to interactivity URLs (events.go).
package slacktest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"loadout/bridge/bridgetest"
)

// Identity of the fake workspace and bot.
const (
	TeamID    = "T0001"
	BotUserID = "UBOT"
	BotID     = "B0001"
)

// Wait is how long the Wait helpers wait before failing a test: the
// kit's.
const Wait = bridgetest.Wait

// Call is one request the fake received.
type Call struct {
	// Method is the Web API method ("chat.postMessage"), or "response_url".
	Method string
	// Token is the token sent, as a bearer header or a form field.
	Token string
	// Params are the form or JSON fields, as strings.
	Params map[string]string
}

// Server is a fake Slack. It is safe for concurrent use.
type Server struct {
	// URL is the server's base URL.
	URL string
	// APIURL is the Web API base to configure in the client.
	APIURL string

	srv *httptest.Server
	// closing ends when the test does: held calls give up, so closing
	// the server does not wait for them.
	closing context.Context
	stop    context.CancelFunc
	// acting is held while a call is acted on and recorded, and by
	// Messages and Calls: a message a test sees has its call recorded.
	acting sync.RWMutex
	up     websocket.Upgrader

	// holds holds Web API calls by method (see Hold).
	holds bridgetest.Gate
	// changed is the fake's Signal, the one WaitFor watches: the gate's,
	// which it notifies as calls are held and let go, and which every
	// other change a test may wait for notifies too.
	changed *bridgetest.Signal

	calls     bridgetest.Recorder[Call]   // acted on, in order
	abandoned bridgetest.Recorder[Call]   // held, and given up by their client
	acks      bridgetest.Recorder[string] // envelope ids acknowledged
	lost      bridgetest.Recorder[string] // envelope ids whose ack was lost
	uploads   bridgetest.Recorder[Upload] // files the bot shared

	writeMu sync.Mutex // one websocket write at a time

	mu        sync.Mutex
	replyOnly map[string]bool // held methods whose calls Slack acts on (HoldReply)
	failures  map[string][]Failure
	ts        int
	conn      *websocket.Conn
	conns     int
	closed    bool
	reactions map[string]bool   // "channel/ts/name" on a message now
	messages  map[string]string // "channel/ts": the text of a message the bot posted
	files     map[string]File   // shared by people, by id
	staged    map[string][]byte // uploaded by the bot, not yet shared
	downloads int
	envelopes []envelope // sent over Socket Mode, in order
	lose      int        // acknowledgements still to lose
}

// NewServer starts a fake Slack on 127.0.0.1, closed when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{replyOnly: map[string]bool{}, failures: map[string][]Failure{},
		reactions: map[string]bool{}, messages: map[string]string{}}
	s.changed = &s.holds.Signal
	s.closing, s.stop = context.WithCancel(context.Background())
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
	s.mu.Unlock()
	s.stop() // held calls give up, so Close does not wait for them
	if c != nil {
		c.Close()
	}
	s.srv.Close()
}

// WaitFor waits until cond holds, checking after every change the server
// sees; it fails the test after Wait.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, what, s.changed, cond)
}

// record adds v to r and notifies the fake's Signal, so that WaitFor
// sees it as well as a wait on r.
func record[T any](s *Server, r *bridgetest.Recorder[T], v T) {
	r.Add(v)
	s.changed.Notify()
}
