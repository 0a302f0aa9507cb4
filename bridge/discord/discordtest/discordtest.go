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
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Token is the bot token the fake accepts; it has a real token's shape.
const Token = "MTAwMDAwMDAwMDAwMDAwMDAx.GxYzAb.abcdefghijklmnopqrstuvwxyz0123456789AB"

// The bot's user and application.
const (
	BotID   = "100000000000000001"
	BotName = "loadout"
	AppID   = "100000000000000001"
)

// Wait is how long WaitFor waits.
const Wait = 10 * time.Second

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

	mu        sync.Mutex
	next      int64
	channels  map[string]*channel
	dms       map[string]string // user → DM channel
	members   map[string][]string
	cdn       map[string][]byte
	calls     []Call
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
	hold      int // sends let through before holding; -1 none
	holding   bool
	waiting   int
	release   chan struct{}
}

type channel struct {
	id, guild string
	messages  []*stored
}

// stored is a message in a channel: a person's or the bot's.
type stored struct {
	raw  map[string]any // the message as the API shows it
	sent *Sent          // the bot's, else nil
}

type limit struct {
	method, pattern string
	after           float64
	global          bool
}

// session is a gateway session: its events, each with its sequence
// number, kept to replay on a resume, and its connection if one is open.
type session struct {
	id     string
	events [][]byte
	conn   *conn
}

type conn struct {
	ws  *websocket.Conn
	out chan []byte
}

// New starts a fake Discord, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{t: t, channels: map[string]*channel{}, dms: map[string]string{},
		members: map[string][]string{}, cdn: map[string][]byte{}, commands: map[string][]string{},
		responses: map[string][]Response{}, tokens: map[string]string{}, used: map[string][2]string{}, typing: map[string]int{}, hold: -1,
		release: make(chan struct{})}
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
		if s.holding {
			close(s.release)
			s.holding = false
		}
		s.mu.Unlock()
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

// DM is the direct message channel between the bot and user.
func (s *Server) DM(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dm(user)
}

func (s *Server) dm(user string) string {
	if ch, ok := s.dms[user]; ok {
		return ch
	}
	ch := "9" + user
	s.dms[user] = ch
	s.channels[ch] = &channel{id: ch}
	return ch
}

// Channel adds a channel (or thread) of a server.
func (s *Server) Channel(guild, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[id] = &channel{id: id, guild: guild}
}

// Roles makes user a member of guild with roles.
func (s *Server) Roles(guild, user string, roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[guild+"/"+user] = append([]string{}, roles...)
}

func userJSON(u User) map[string]any {
	return map[string]any{"id": u.ID, "username": u.Name, "discriminator": "0", "global_name": u.Name}
}

func bot() map[string]any {
	return map[string]any{"id": BotID, "username": BotName, "discriminator": "0", "bot": true}
}

// Post is a person's message: it is kept in its channel (for the API to
// list) and dispatched to the gateway session, or kept for its resume
// while no connection is open. It returns the message's id.
func (s *Server) Post(m Message) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[m.Channel]
	if ch == nil {
		ch = &channel{id: m.Channel, guild: m.Guild}
		s.channels[m.Channel] = ch
	}
	id := s.id()
	content := m.Content
	var mentions []any
	if m.Mention {
		content = "<@" + BotID + "> " + content
		mentions = append(mentions, bot())
	}
	var atts []any
	for _, a := range m.Attachments {
		aid := s.id()
		s.cdn[aid] = a.Content
		size := a.Size
		if size == 0 {
			size = len(a.Content)
		}
		att := map[string]any{"id": aid, "filename": a.Name, "content_type": a.ContentType, "size": size,
			"url": s.URL + "/cdn/attachments/" + m.Channel + "/" + aid + "/" + a.Name}
		if a.Seconds > 0 {
			att["duration_secs"] = a.Seconds
			att["waveform"] = "AAAA"
		}
		atts = append(atts, att)
	}
	raw := map[string]any{"id": id, "channel_id": m.Channel, "author": userJSON(m.Author), "content": content,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "type": 0, "mentions": mentions, "attachments": atts}
	if m.Voice {
		raw["flags"] = 1 << 13
	}
	if m.ReplyTo != "" {
		raw["type"] = 19
		raw["message_reference"] = map[string]any{"message_id": m.ReplyTo, "channel_id": m.Channel}
		if ref := s.find(m.ReplyTo); ref != nil {
			raw["referenced_message"] = ref.raw
		}
	}
	ch.messages = append(ch.messages, &stored{raw: raw})
	event := clone(raw)
	if m.Guild != "" {
		event["guild_id"] = m.Guild
		roles := m.Roles
		if roles == nil {
			roles = s.members[m.Guild+"/"+m.Author.ID]
		}
		event["member"] = map[string]any{"roles": append([]string{}, roles...)}
	}
	s.dispatch("MESSAGE_CREATE", event)
	return id
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// find is the message id, in any channel; s.mu is held.
func (s *Server) find(id string) *stored {
	for _, ch := range s.channels {
		for _, m := range ch.messages {
			if m.raw["id"] == id {
				return m
			}
		}
	}
	return nil
}

// Redispatch sends the MESSAGE_CREATE of message id again, as Discord
// may after a resume.
func (s *Server) Redispatch(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(id)
	if m == nil {
		s.t.Errorf("discordtest: no message %s to dispatch again", id)
		return
	}
	event := clone(m.raw)
	if g := s.channels[m.raw["channel_id"].(string)].guild; g != "" {
		event["guild_id"] = g
	}
	s.dispatch("MESSAGE_CREATE", event)
}

// Command is a person using slash command name (with text as its one
// option, when not empty) in channel. It returns the interaction's id.
func (s *Server) Command(u User, guild, channel, name, text string) string {
	data := map[string]any{"id": "cmd-" + name, "name": name, "type": 1}
	if text != "" {
		data["options"] = []any{map[string]any{"name": "text", "type": 3, "value": text}}
	}
	return s.interact(u, guild, channel, 2, data, nil)
}

// Press is a person pressing the button customID of the bot's message.
func (s *Server) Press(u User, guild, messageID, customID string) string {
	s.mu.Lock()
	m := s.find(messageID)
	s.mu.Unlock()
	if m == nil || m.sent == nil {
		s.t.Fatalf("discordtest: no message %s of the bot to press on", messageID)
	}
	s.mu.Lock()
	msg := clone(m.raw)
	msg["content"] = m.sent.Content
	s.mu.Unlock()
	return s.interact(u, guild, m.sent.Channel, 3, map[string]any{"custom_id": customID, "component_type": 2}, msg)
}

func (s *Server) interact(u User, guild, channel string, kind int, data, msg map[string]any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id()
	token := "itoken-" + id
	s.tokens[token] = id
	ev := map[string]any{"id": id, "application_id": AppID, "type": kind, "data": data, "channel_id": channel, "token": token, "version": 1}
	if guild != "" {
		ev["guild_id"] = guild
		ev["member"] = map[string]any{"user": userJSON(u), "roles": s.members[guild+"/"+u.ID]}
	} else {
		ev["user"] = userJSON(u)
	}
	pressed := ""
	if msg != nil {
		ev["message"] = msg
		pressed, _ = msg["id"].(string)
	}
	s.used[id] = [2]string{channel, pressed}
	s.dispatch("INTERACTION_CREATE", ev)
	return id
}

// Responses are the bot's answers to interaction id.
func (s *Server) Responses(id string) []Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.responses[id])
}

// Sent are the bot's messages in channel, in order, as they stand.
func (s *Server) Sent(channel string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	if ch := s.channels[channel]; ch != nil {
		for _, m := range ch.messages {
			if m.sent != nil {
				out = append(out, *m.sent)
			}
		}
	}
	return out
}

// Count is how many messages the bot has in channel.
func (s *Server) Count(channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if ch := s.channels[channel]; ch != nil {
		for _, m := range ch.messages {
			if m.sent != nil {
				n++
			}
		}
	}
	return n
}

// Calls are the REST requests made whose method is method and whose
// path (under the API) matches pattern ("/channels/*/messages").
func (s *Server) Calls(method, pattern string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if ok, _ := path.Match(pattern, c.Path); ok && c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Commands are the slash commands registered in scope (a server's id,
// "" for global), by name.
func (s *Server) Commands(scope string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commands[scope])
}

// Typing counts the typing signs in channel.
func (s *Server) Typing(channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.typing[channel]
}

// Gateway is what the gateway saw: identifies (new sessions), resumes,
// connections opened, and the intents of the last Identify.
func (s *Server) Gateway() (identifies, resumes, conns, intents int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions, s.resumes, s.conns, s.intents
}

// Connected reports whether a gateway connection is open and its
// session started.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session != nil && s.session.conn != nil
}

// Drop closes the gateway connection abruptly; events until the bot
// resumes are kept for it.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil && s.session.conn != nil {
		s.session.conn.ws.UnderlyingConn().Close()
		s.session.conn = nil
	}
}

// NoResume makes every resume fail (op 9): the bot must identify anew,
// and what the old session had not delivered is lost to the gateway.
func (s *Server) NoResume(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noResume = on
}

// RateLimit answers the next request of method on pattern with a 429
// that asks to retry after seconds, the bot's global limit when global.
func (s *Server) RateLimit(method, pattern string, seconds float64, global bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, limit{method, pattern, seconds, global})
}

// RejectToken answers every request 401 and closes the gateway with
// 4004, as for a wrong token.
func (s *Server) RejectToken(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badToken = on
}

// Hold lets the bot's next n channel messages through and holds the
// rest until Release; a held request the bot abandons is never posted.
func (s *Server) Hold(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.holding = n, true
}

// Waiting counts the held requests.
func (s *Server) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Release lets held and later messages through.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holding {
		close(s.release)
		s.release = make(chan struct{})
	}
	s.hold, s.holding = -1, false
}

// WaitFor waits until cond holds, failing the test after Wait.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("discordtest: %s did not happen within %s", what, Wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// dispatch sends an event to the session; s.mu is held.
func (s *Server) dispatch(kind string, d any) {
	if s.session == nil {
		return // nobody ever connected: the event reaches no one
	}
	se := s.session
	b, _ := json.Marshal(map[string]any{"op": 0, "t": kind, "s": len(se.events) + 1, "d": d})
	se.events = append(se.events, b)
	if se.conn != nil {
		se.conn.send(b)
	}
}

func (c *conn) send(b []byte) {
	select {
	case c.out <- b:
	default: // a bot that reads nothing loses its connection
		c.ws.UnderlyingConn().Close()
	}
}

// gateway serves one websocket connection of the gateway.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws, out: make(chan []byte, 4096)}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case b := <-c.out:
				if ws.WriteMessage(websocket.TextMessage, b) != nil {
					return
				}
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	defer ws.Close()
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	c.out <- mustJSON(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 41250}})
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			s.mu.Lock()
			if s.session != nil && s.session.conn == c {
				s.session.conn = nil
			}
			s.mu.Unlock()
			return
		}
		var f struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if json.Unmarshal(b, &f) != nil {
			return
		}
		switch f.Op {
		case 1:
			c.out <- mustJSON(map[string]any{"op": 11})
		case 2:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			json.Unmarshal(f.D, &id)
			s.mu.Lock()
			if id.Token != "Bot "+Token || s.badToken {
				s.mu.Unlock()
				ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."))
				return
			}
			if s.session != nil && s.session.conn != nil && s.session.conn != c {
				s.session.conn.ws.UnderlyingConn().Close()
			}
			s.sessions++
			s.intents = id.Intents
			s.session = &session{id: fmt.Sprintf("session-%d", s.sessions), conn: c}
			s.dispatch("READY", map[string]any{"v": 10, "session_id": s.session.id, "user": bot(),
				"application": map[string]any{"id": AppID, "flags": 0}, "guilds": []any{}, "private_channels": []any{},
				"resume_gateway_url": s.GatewayURL})
			s.mu.Unlock()
		case 6:
			var re struct {
				Session string `json:"session_id"`
				Seq     int    `json:"seq"`
			}
			json.Unmarshal(f.D, &re)
			s.mu.Lock()
			se := s.session
			if s.noResume || se == nil || se.id != re.Session || re.Seq > len(se.events) {
				s.mu.Unlock()
				c.out <- mustJSON(map[string]any{"op": 9, "d": false})
				continue
			}
			s.resumes++
			if se.conn != nil && se.conn != c {
				se.conn.ws.UnderlyingConn().Close()
			}
			se.conn = c
			for _, e := range se.events[re.Seq:] {
				c.send(e)
			}
			se.events = append(se.events, mustJSON(map[string]any{"op": 0, "t": "RESUMED", "s": len(se.events) + 1, "d": map[string]any{}}))
			c.send(se.events[len(se.events)-1])
			s.mu.Unlock()
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// download serves the CDN's attachments.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/cdn/attachments/"), "/")
	s.mu.Lock()
	var b []byte
	ok := false
	if len(parts) == 3 {
		b, ok = s.cdn[parts[1]]
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(b)
}

// fail answers an API error as Discord does.
func fail(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"message": msg, "code": code})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// api serves the REST API.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	p := "/" + strings.TrimPrefix(r.URL.Path, "/api/v9/")
	q := map[string]string{}
	for k, v := range r.URL.Query() {
		q[k] = v[0]
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: p, Query: q, At: time.Now()})
	if s.badToken || r.Header.Get("Authorization") != "Bot "+Token {
		s.mu.Unlock()
		fail(w, http.StatusUnauthorized, 0, "401: Unauthorized")
		return
	}
	for i, l := range s.limits {
		if ok, _ := path.Match(l.pattern, p); ok && l.method == r.Method {
			s.limits = slices.Delete(s.limits, i, i+1)
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", strconv.Itoa(int(l.after+0.999)))
			if l.global {
				w.Header().Set("X-RateLimit-Global", "true")
				w.Header().Set("X-RateLimit-Scope", "global")
			}
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(map[string]any{"message": "You are being rate limited.", "retry_after": l.after, "global": l.global})
			return
		}
	}
	s.mu.Unlock()
	seg := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case r.Method == "GET" && (p == "/gateway" || p == "/gateway/bot"):
		reply(w, map[string]any{"url": s.GatewayURL, "shards": 1})
	case r.Method == "GET" && p == "/users/@me":
		reply(w, bot())
	case r.Method == "POST" && p == "/users/@me/channels":
		var body struct {
			Recipient string `json:"recipient_id"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		reply(w, map[string]any{"id": s.DM(body.Recipient), "type": 1})
	case r.Method == "GET" && len(seg) == 4 && seg[0] == "guilds" && seg[2] == "members":
		s.mu.Lock()
		roles, ok := s.members[seg[1]+"/"+seg[3]]
		s.mu.Unlock()
		if !ok {
			fail(w, http.StatusNotFound, 10007, "Unknown Member")
			return
		}
		reply(w, map[string]any{"user": map[string]any{"id": seg[3]}, "roles": roles})
	case r.Method == "PUT" && len(seg) >= 3 && seg[0] == "applications" && seg[len(seg)-1] == "commands":
		s.putCommands(w, r, seg)
	case len(seg) >= 3 && seg[0] == "channels" && seg[2] == "typing" && r.Method == "POST":
		s.mu.Lock()
		s.typing[seg[1]]++
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == "GET":
		s.list(w, seg[1], q)
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == "POST":
		s.create(w, r, seg[1], "")
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == "PATCH":
		s.edit(w, r, seg[1], seg[3])
	case len(seg) == 4 && seg[0] == "interactions" && seg[3] == "callback" && r.Method == "POST":
		s.callback(w, r, seg[1], seg[2])
	case len(seg) == 3 && seg[0] == "webhooks" && r.Method == "POST":
		s.followUp(w, r, seg[2])
	case len(seg) == 5 && seg[0] == "webhooks" && seg[3] == "messages" && r.Method == "PATCH":
		s.mu.Lock()
		id, ok := s.tokens[seg[2]]
		ch := ""
		if m := s.find(seg[4]); ok && m != nil && m.sent != nil && m.sent.Interaction == id {
			ch = m.sent.Channel
		}
		s.mu.Unlock()
		if ch == "" {
			fail(w, http.StatusNotFound, 10008, "Unknown Message")
			return
		}
		s.edit(w, r, ch, seg[4])
	default:
		fail(w, http.StatusNotFound, 0, "404: Not Found")
	}
}

func (s *Server) putCommands(w http.ResponseWriter, r *http.Request, seg []string) {
	var cmds []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := json.NewDecoder(r.Body).Decode(&cmds); err != nil {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return
	}
	scope := ""
	if len(seg) == 5 && seg[2] == "guilds" {
		scope = seg[3]
	}
	var names []string
	for _, c := range cmds {
		if c.Name == "" || len(c.Description) > 100 || c.Description == "" {
			fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
			return
		}
		names = append(names, c.Name)
	}
	s.mu.Lock()
	s.commands[scope] = names
	s.overwrite++
	s.mu.Unlock()
	reply(w, cmds)
}

// list answers GET /channels/{id}/messages: with after, the oldest
// limit messages after it, newest first, as Discord lists them.
func (s *Server) list(w http.ResponseWriter, channel string, q map[string]string) {
	limit, _ := strconv.Atoi(q["limit"])
	if limit <= 0 || limit > 100 {
		limit = 50
	}
	s.mu.Lock()
	ch := s.channels[channel]
	var out []any
	if ch != nil {
		var pick []*stored
		after := q["after"]
		for _, m := range ch.messages {
			if after == "" || less(after, m.raw["id"].(string)) {
				pick = append(pick, m)
			}
		}
		if after != "" && len(pick) > limit {
			pick = pick[:limit]
		} else if len(pick) > limit {
			pick = pick[len(pick)-limit:]
		}
		for i := len(pick) - 1; i >= 0; i-- {
			out = append(out, s.shown(pick[i]))
		}
	}
	s.mu.Unlock()
	if ch == nil {
		fail(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	reply(w, out)
}

func less(x, y string) bool { return len(x) < len(y) || len(x) == len(y) && x < y }

// shown is a message as the API lists it; s.mu is held.
func (s *Server) shown(m *stored) map[string]any {
	if m.sent == nil {
		return m.raw
	}
	out := clone(m.raw)
	out["content"] = m.sent.Content
	return out
}

// payload reads a message the bot posts: JSON, or multipart with
// payload_json and files.
func payload(r *http.Request) (map[string]any, []File, error) {
	var body map[string]any
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		err := json.NewDecoder(r.Body).Decode(&body)
		return body, nil, err
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	var files []File
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		b, _ := io.ReadAll(part)
		if part.FormName() == "payload_json" {
			if err := json.Unmarshal(b, &body); err != nil {
				return nil, nil, err
			}
			continue
		}
		files = append(files, File{Name: part.FileName(), Content: b})
	}
	if atts, ok := body["attachments"].([]any); ok {
		for i, a := range atts {
			if am, ok := a.(map[string]any); ok && i < len(files) {
				files[i].Duration, _ = am["duration_secs"].(float64)
			}
		}
	}
	return body, files, nil
}

// buttonsOf reads the buttons of components.
func buttonsOf(v any) []Button {
	var out []Button
	rows, _ := v.([]any)
	for _, row := range rows {
		rm, _ := row.(map[string]any)
		cs, _ := rm["components"].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			label, _ := cm["label"].(string)
			id, _ := cm["custom_id"].(string)
			out = append(out, Button{Label: label, CustomID: id})
		}
	}
	return out
}

// create posts the bot's message in channel (a follow-up of interaction
// when not ""), held when Hold says so, once per nonce when asked.
func (s *Server) create(w http.ResponseWriter, r *http.Request, channel, interaction string) {
	body, files, err := payload(r)
	if err != nil {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return
	}
	content, _ := body["content"].(string)
	flags, _ := body["flags"].(float64)
	if len([]rune(content)) > 2000 {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
		return
	}
	if content == "" && len(files) == 0 && body["components"] == nil {
		fail(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return
	}
	if interaction == "" {
		s.mu.Lock()
		if s.holding && s.hold == 0 {
			s.waiting++
			release := s.release
			s.mu.Unlock()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			s.mu.Lock()
			s.waiting--
			s.mu.Unlock()
			if r.Context().Err() != nil {
				return // abandoned: never posted
			}
		} else {
			if s.holding && s.hold > 0 {
				s.hold--
			}
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[channel]
	if ch == nil {
		fail(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	nonce, _ := body["nonce"].(string)
	if enforce, _ := body["enforce_nonce"].(bool); enforce && nonce != "" {
		for _, m := range ch.messages {
			if m.sent != nil && m.sent.Nonce == nonce {
				reply(w, s.shown(m))
				return
			}
		}
	}
	id := s.id()
	sent := &Sent{ID: id, Channel: channel, Content: content, Buttons: buttonsOf(body["components"]), Nonce: nonce,
		Flags: int(flags), Ephemeral: int(flags)&64 != 0, Interaction: interaction, Files: files, At: time.Now()}
	if ref, ok := body["message_reference"].(map[string]any); ok {
		sent.Reply, _ = ref["message_id"].(string)
	}
	raw := map[string]any{"id": id, "channel_id": channel, "author": bot(), "content": content, "type": 0,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "flags": int(flags)}
	ch.messages = append(ch.messages, &stored{raw: raw, sent: sent})
	reply(w, raw)
}

func (s *Server) edit(w http.ResponseWriter, r *http.Request, channel, id string) {
	body, _, err := payload(r)
	if err != nil {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(id)
	if m == nil || m.sent == nil || m.sent.Channel != channel {
		fail(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	if c, ok := body["content"].(string); ok {
		if len([]rune(c)) > 2000 {
			fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
			return
		}
		m.sent.Content = c
	}
	if cs, ok := body["components"]; ok {
		m.sent.Buttons = buttonsOf(cs)
	}
	m.sent.Edits++
	reply(w, s.shown(m))
}

// callback takes the bot's answer to an interaction.
func (s *Server) callback(w http.ResponseWriter, r *http.Request, id, token string) {
	var body struct {
		Type int `json:"type"`
		Data struct {
			Content    string `json:"content"`
			Flags      int    `json:"flags"`
			Components any    `json:"components"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens[token] != id {
		fail(w, http.StatusNotFound, 10062, "Unknown interaction")
		return
	}
	if len(s.responses[id]) > 0 {
		fail(w, http.StatusBadRequest, 40060, "Interaction has already been acknowledged.")
		return
	}
	resp := Response{Type: body.Type, Content: body.Data.Content, Flags: body.Data.Flags, Buttons: buttonsOf(body.Data.Components)}
	s.responses[id] = append(s.responses[id], resp)
	if body.Type == 7 { // the message the button is on is updated
		for _, ch := range s.channels {
			for _, m := range ch.messages {
				if m.sent != nil && s.pressedOn(id, m) {
					m.sent.Content = body.Data.Content
					m.sent.Buttons = resp.Buttons
					m.sent.Edits++
				}
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// pressedOn reports whether interaction id was a press on m.
func (s *Server) pressedOn(id string, m *stored) bool {
	return s.used[id][1] != "" && s.used[id][1] == m.raw["id"]
}

// followUp posts a follow-up of the interaction whose token it is.
func (s *Server) followUp(w http.ResponseWriter, r *http.Request, token string) {
	s.mu.Lock()
	id, ok := s.tokens[token]
	var channel string
	if ok {
		channel = s.interactionChannel(id)
	}
	acked := len(s.responses[id]) > 0
	s.mu.Unlock()
	if !ok || channel == "" {
		fail(w, http.StatusNotFound, 10015, "Unknown Webhook")
		return
	}
	if !acked {
		fail(w, http.StatusNotFound, 10015, "Unknown Webhook")
		return
	}
	s.create(w, r, channel, id)
}

// interactionChannel is where interaction id was used; s.mu is held.
func (s *Server) interactionChannel(id string) string { return s.used[id][0] }

// Expire makes interaction id's token stop working, as after 15 minutes.
func (s *Server) Expire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, i := range s.tokens {
		if i == id {
			delete(s.tokens, tok)
		}
	}
}
