// Package whatsapptest is a fake WhatsApp Cloud API for tests: the Graph
// API a business calls (its number's record, the messages endpoint with
// text, interactive buttons, templates, documents and audio, read
// receipts and "typing…", media upload, lookup and download), and the
// webhook side, which plays the people: it posts their messages to the
// channel's webhook signed as Meta signs them (X-Hub-Signature-256, the
// HMAC-SHA256 of the body under the app secret), delivers a message
// again, presses buttons, and reports the status of what the bot sent.
// It enforces WhatsApp's limits (4,096 characters of text, 1,024 of an
// interactive body, three buttons of 20 characters) and, when asked to,
// the 24-hour window the way Meta does: the send is taken, and a failed
// status (131047) follows. Faults are at hand: failed calls, failed
// downloads, held sends.
//
// The parts: the Graph API's routes (graph.go), the messages endpoint
// and what it recorded (messages.go), media (media.go), the people's
// side (people.go), webhook deliveries and their signatures
// (webhook.go), and faults and holds (faults.go). What every fake needs
// besides (the record, the gate, the wait) is bridgetest's kit.
package whatsapptest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// Credentials the fake takes; the token has a real one's shape.
const (
	Token         = "EAAtestTOKEN0123456789abcdefghijkLMNOP"
	PhoneNumberID = "100000000000001"
	Display       = "15550001111"
	AppSecret     = "app-secret-for-tests"
	VerifyToken   = "verify-token-for-tests"
	// Version is the Graph API version the fake serves.
	Version = "v24.0"
)

// Wait is how long WaitFor waits: the kit's.
const Wait = bridgetest.Wait

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's base; APIURL the Graph API's with its version
	// (whatsapp.api_url).
	URL, APIURL string

	t   testing.TB
	srv *httptest.Server

	// sent and reads are what the bot sent: messages, and read receipts.
	sent  bridgetest.Recorder[Sent]
	reads bridgetest.Recorder[Read]
	// gate holds sends, all under the one key "", from Hold to Release.
	gate bridgetest.Gate
	// changed is notified at every change a test may wait for: a message
	// or receipt taken, a download, a held send ending.
	changed bridgetest.Signal

	mu       sync.Mutex
	next     int
	media    map[string]personFile // people's files, by media id
	uploads  map[string]File
	failures []Failure
	// downloadFails is how many downloads fail (500) before one works.
	downloadFails int
	downloads     int
	badToken      bool
	// webhook is where people's messages and statuses go.
	webhook string
	secret  string
	bodies  map[string][]byte // messages posted, by id, for Redeliver
	// seen is when each person last wrote, for the window.
	seen map[string]time.Time
	// window: sends of free text outside it fail with 131047 as Meta's do.
	window   bool
	statuses bool // report sent/delivered/read for every message sent
	now      func() time.Time
}

// New starts a fake WhatsApp, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{t: t, media: map[string]personFile{}, uploads: map[string]File{}, bodies: map[string][]byte{},
		seen: map[string]time.Time{}, secret: AppSecret, now: time.Now}
	mux := http.NewServeMux()
	mux.HandleFunc("/"+Version+"/", s.api)
	mux.HandleFunc("/download/", s.download)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.APIURL = s.srv.URL + "/" + Version + "/"
	t.Cleanup(func() {
		s.Release()
		s.srv.Close()
	})
	return s
}

// EnforceWindow makes sends of anything but a template to a person who
// last wrote more than 24 hours ago (by Clock) fail as Meta's do: taken,
// then reported failed with code 131047.
func (s *Server) EnforceWindow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = true
}

// ReportStatuses makes the fake report sent, delivered and read for
// each message it takes.
func (s *Server) ReportStatuses() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses = true
}

// Clock sets the fake's clock.
func (s *Server) Clock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// WaitFor waits until cond holds, or fails the test; it checks cond at
// every change of the fake's state, and on the kit's short tick for what
// else cond may watch.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, what, &s.changed, cond)
}
