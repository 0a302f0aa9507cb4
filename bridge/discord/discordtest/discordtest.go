// Package discordtest is a fake Discord for tests: the REST API a bot
// calls (its user, direct message channels, messages posted, edited and
// listed, typing, interaction answers and follow-ups, application
// commands, server members, multipart uploads), the CDN its attachments
// are downloaded from, and the gateway (Hello, Identify, Ready, Resume,
// heartbeats, dispatches), over a real websocket. Tests drive the real
// discordgo client against it, play the people (messages, slash
// commands, button presses), and read back what the bot did. Faults are
// at hand: a dropped connection, a session that cannot be resumed, a
// 429 (global or not), a held send, a rejected token.
package discordtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// Token is the bot token the fake accepts; it has a real token's shape.
const Token = "MTAwMDAwMDAwMDAwMDAwMDAx.GxYzAb.abcdefghijklmnopqrstuvwxyz0123456789AB"

// The bot's user and application.
const (
	BotID   = "100000000000000001"
	BotName = "loadout"
	AppID   = "100000000000000001"
)

// Wait is how long WaitFor waits: the kit's wait, as every fake's.
const Wait = bridgetest.Wait

// User is a person on Discord.
type User struct {
	ID   string
	Name string
}

// Attachment is a file a person sends. Size is what the message states
// (the content's length when zero); Seconds is a recording's length.
type Attachment struct {
	Name, ContentType string
	Content           []byte
	Size              int
	Seconds           float64
}

// Message is a person's message.
type Message struct {
	Author User
	// Channel is the channel or thread; Guild is "" in a direct message.
	Channel, Guild string
	Content        string
	// Mention puts a mention of the bot before Content.
	Mention bool
	// ReplyTo is the id of a message this one replies to.
	ReplyTo string
	// Roles are the author's roles in Guild, sent with the message.
	Roles       []string
	Attachments []Attachment
	// Voice marks a voice message recorded in Discord.
	Voice bool
}

// Sent is a message the bot posted (or a follow-up of an interaction),
// as it stands now.
type Sent struct {
	ID, Channel string
	Content     string
	// Buttons are the custom ids and labels of its buttons.
	Buttons []Button
	// Reply is the message it replies to.
	Reply string
	Nonce string
	// Ephemeral: only the person who used the interaction sees it.
	Ephemeral bool
	// Interaction is the interaction it follows up, if any.
	Interaction string
	Flags       int
	Files       []File
	// Edits counts the edits after it was posted.
	Edits int
	At    time.Time
}

// Button is a button of a message.
type Button struct{ Label, CustomID string }

// File is an uploaded file.
type File struct {
	Name    string
	Content []byte
	// Duration and Waveform describe a voice message's attachment.
	Duration float64
}

// Response is how the bot answered an interaction: its type
// (4 message, 5 deferred message, 6 deferred update, 7 update) and
// its message's text and flags.
type Response struct {
	Type    int
	Content string
	Flags   int
	Buttons []Button
}

// Call is one REST request the bot made.
type Call struct {
	Method, Path string
	Query        map[string]string
	At           time.Time
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's base; APIURL the REST API's (api_url);
	// GatewayURL the gateway's websocket (gateway_url).
	URL, APIURL, GatewayURL string

	t   testing.TB
	srv *httptest.Server

	// calls are the REST requests the bot made, in order.
	calls bridgetest.Recorder[Call]
	// gate holds the bot's channel messages, under the key "": the
	// fake's one hold (see Hold).
	gate bridgetest.Gate

	mu        sync.Mutex
	next      int64
	channels  map[string]*channel
	dms       map[string]string // user → DM channel
	members   map[string][]string
	cdn       map[string][]byte
	commands  map[string][]string // scope ("" global) → names
	overwrite int
	responses map[string][]Response // interaction id → responses
	tokens    map[string]string     // interaction token → interaction id
	used      map[string][2]string  // interaction id → its channel and the message pressed
	typing    map[string]int
	limits    []limit
	badToken  bool
	intents   int
	session   *session
	sessions  int // identifies
	resumes   int
	conns     int
	noResume  bool
}

// New starts a fake Discord, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{t: t, channels: map[string]*channel{}, dms: map[string]string{},
		members: map[string][]string{}, cdn: map[string][]byte{}, commands: map[string][]string{},
		responses: map[string][]Response{}, tokens: map[string]string{}, used: map[string][2]string{}, typing: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v9/", s.api)
	mux.HandleFunc("/cdn/", s.download)
	mux.HandleFunc("/gateway", s.gateway)
	mux.HandleFunc("/gateway/", s.gateway)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.APIURL = s.URL + "/api/v9/"
	s.GatewayURL = "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway"
	t.Cleanup(func() {
		s.mu.Lock()
		if s.session != nil && s.session.conn != nil {
			s.session.conn.ws.Close()
		}
		s.mu.Unlock()
		s.gate.Release("")
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

// id returns a new snowflake: the time in ms since 2015 in its high
// bits, as Discord's, and growing with each.
func (s *Server) id() string {
	s.next = max(s.next+1, (time.Now().UnixMilli()-1420070400000)<<22)
	return strconv.FormatInt(s.next, 10)
}

func userJSON(u User) map[string]any {
	return map[string]any{"id": u.ID, "username": u.Name, "discriminator": "0", "global_name": u.Name}
}

func bot() map[string]any {
	return map[string]any{"id": BotID, "username": BotName, "discriminator": "0", "bot": true}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// changed is the Signal notified at every change of the fake's state,
// for WaitFor. It is the gate's own: the gate notifies it when a held
// message starts or stops waiting, and the fake when a request was
// made or answered, an event dispatched, or a connection of the gateway
// opened or lost, so one Signal wakes a wait on any of them.
func (s *Server) changed() *bridgetest.Signal { return &s.gate.Signal }

// WaitFor waits until cond holds, checking it at every change of the
// fake's state (and on the kit's tick, for what cond watches besides
// the fake), failing the test after Wait.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, "discordtest: "+what, s.changed(), cond)
}
