// Package signaltest is a fake signal-cli daemon (its HTTP JSON-RPC
// endpoint, on 127.0.0.1) with the Signal server's queue behind it:
// messages wait until a receive call takes them, and as signal-cli's, a
// call takes what comes within its timeout whether or not its client is
// still there to read the answer. The rest is bridgetest's kit.
package signaltest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// Account is the bot's number.
const Account = "+15550000000"

// Wait is how long the fake's waits last before a test fails.
const Wait = bridgetest.Wait

// Person is someone who writes to the bot; Number is "" when Signal
// does not share it.
type Person struct{ Number, UUID, Name string }

// File is an attachment, sent or received.
type File struct {
	Name, Type string
	Content    []byte
	Voice      bool // a voice note, as some signal-cli versions say

}

// Message is what a person sends: in Group (its id; "" is a direct
// message), Mention mentions the bot at the start of the text as Signal
// does (a placeholder character and a mention range), and Quote is the
// timestamp of a message of the bot's it quotes.
type Message struct {
	From        Person
	Group, Text string
	Mention     bool
	Quote       int64
	Files       []File
}

// Sent is a message the bot sent.
type Sent struct {
	TS        int64
	To, Group string // the recipient (account id or number), or the group
	Text      string
	QuoteTS   int64
	Files     []File
	VoiceNote bool
}

// Call is one JSON-RPC call the bot made.
type Call struct {
	Method string
	Params map[string]any
}

// Server is the fake daemon, at URL (the channel's rpc_url). Create it
// with New; it closes when the test ends.
type Server struct {
	URL string

	srv     *httptest.Server
	closing chan struct{}
	queued  bridgetest.Signal // the queue changed
	sent    bridgetest.Recorder[Sent]
	calls   bridgetest.Recorder[Call]
	gate    bridgetest.Gate // holds "send"

	mu        sync.Mutex
	queue     []map[string]any
	pushed    map[int64]map[string]any // every envelope, by timestamp
	files     map[string][]byte
	receiving bool
	clock     int64
	fails     map[string][]rpcError
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// New starts a fake daemon for t.
func New(t testing.TB) *Server {
	s := &Server{closing: make(chan struct{}), pushed: map[int64]map[string]any{}, files: map[string][]byte{},
		fails: map[string][]rpcError{}, clock: time.Now().UnixMilli()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/rpc", s.rpc)
	mux.HandleFunc("GET /api/v1/check", func(http.ResponseWriter, *http.Request) {})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(func() { close(s.closing); s.srv.CloseClientConnections(); s.srv.Close() })
	return s
}

// now is a new timestamp, later than every one before; s.mu is held.
func (s *Server) now() int64 { s.clock++; return s.clock }

// Push queues m at the Signal server as its person sends it, and returns
// its timestamp, which names it.
func (s *Server) Push(m Message) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := map[string]any{"message": m.Text, "expiresInSeconds": 0, "viewOnce": false}
	if m.Mention {
		data["message"] = "\uFFFC " + m.Text
		data["mentions"] = []map[string]any{{"name": Account, "number": Account, "uuid": "bot-uuid", "start": 0, "length": 1}}
	}
	if m.Group != "" {
		data["groupInfo"] = map[string]any{"groupId": m.Group, "type": "DELIVER", "revision": 1}
	}
	if m.Quote != 0 {
		data["quote"] = map[string]any{"id": m.Quote, "author": Account, "authorNumber": Account, "text": ""}
	}
	var atts []map[string]any
	for i, f := range m.Files {
		id := strings.ReplaceAll(base64.RawURLEncoding.EncodeToString([]byte(f.Name)), "-", "") + "-" + string(rune('a'+i))
		s.files[id] = f.Content
		at := map[string]any{"contentType": f.Type, "filename": f.Name, "id": id, "size": len(f.Content)}
		if f.Voice {
			at["voiceNote"], at["filename"] = true, nil
		}
		atts = append(atts, at)
	}
	if atts != nil {
		data["attachments"] = atts
	}
	return s.queueLocked(m.From, map[string]any{"dataMessage": data})
}

// React queues from's reaction with emoji to the bot's message sent at
// target, in group ("" for a direct chat), and returns its timestamp.
func (s *Server) React(from Person, group string, target int64, emoji string) int64 {
	data := map[string]any{"reaction": map[string]any{"emoji": emoji, "targetAuthor": Account,
		"targetAuthorNumber": Account, "targetAuthorUuid": "bot-uuid", "targetSentTimestamp": target, "isRemove": false}}
	if group != "" {
		data["groupInfo"] = map[string]any{"groupId": group, "type": "DELIVER"}
	}
	return s.Envelope(from, map[string]any{"dataMessage": data})
}

// Envelope queues an envelope of from with the given parts besides the
// sender's (a receiptMessage, typingMessage, syncMessage …), and
// returns its timestamp.
func (s *Server) Envelope(from Person, parts map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueLocked(from, parts)
}

// queueLocked queues an envelope of from, with a new timestamp (its data
// message's too), and returns the timestamp; s.mu is held.
func (s *Server) queueLocked(from Person, parts map[string]any) int64 {
	ts := s.now()
	if dm, ok := parts["dataMessage"].(map[string]any); ok {
		dm["timestamp"] = ts
	}
	var number any // null when Signal does not share it
	if from.Number != "" {
		number = from.Number
	}
	env := map[string]any{"source": from.Number, "sourceNumber": number, "sourceUuid": from.UUID,
		"sourceName": from.Name, "sourceDevice": 1, "timestamp": ts, "serverReceivedTimestamp": ts, "serverDeliveredTimestamp": ts}
	for k, v := range parts {
		env[k] = v
	}
	s.pushed[ts] = env
	s.queue = append(s.queue, env)
	s.queued.Notify()
	return ts
}

// Redeliver queues the envelope of timestamp ts again, as signal-cli
// hands over again, after a crash of its own, what it had not finished.
func (s *Server) Redeliver(ts int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if env, ok := s.pushed[ts]; ok {
		s.queue = append(s.queue, env)
		s.queued.Notify()
	}
}

// Queued is how many envelopes wait at the Signal server.
func (s *Server) Queued() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queue) }

// Fail makes the next call of method answer with a JSON-RPC error.
func (s *Server) Fail(method string, code int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[method] = append(s.fails[method], rpcError{code, message})
}

// Hold lets the next after messages through and holds later ones until
// Release lets them go; Waiting counts those held now. A held message
// whose client gives up is not sent.
func (s *Server) Hold(after int) { s.gate.Hold("send", after) }
func (s *Server) Release()       { s.gate.Release("send") }
func (s *Server) Waiting() int   { return s.gate.Waiting("send") }

// WaitFor waits until cond holds, checked at each change of the fake.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, what, &s.sent.Signal, cond)
}

// Sent is every message the bot sent, in order.
func (s *Server) Sent() []Sent { return s.sent.All() }

// To is what the bot sent to p directly, in order.
func (s *Server) To(p Person) []Sent {
	return s.sent.Filter(func(m Sent) bool { return m.Group == "" && (m.To == p.UUID || (p.Number != "" && m.To == p.Number)) })
}

// InGroup is what the bot sent to group, in order.
func (s *Server) InGroup(group string) []Sent {
	return s.sent.Filter(func(m Sent) bool { return m.Group == group })
}

// Texts are the texts of msgs, those without text left out.
func Texts(msgs []Sent) []string {
	var out []string
	for _, m := range msgs {
		if m.Text != "" {
			out = append(out, m.Text)
		}
	}
	return out
}

// Calls are the calls of method the bot made, in order.
func (s *Server) Calls(method string) []Call {
	return s.calls.Filter(func(c Call) bool { return c.Method == method })
}

// rpc answers one JSON-RPC request.
func (s *Server) rpc(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	var req struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
		ID     any            `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		answer(w, nil, nil, &rpcError{-32700, err.Error()})
		return
	}
	s.calls.Add(Call{req.Method, req.Params})
	s.mu.Lock()
	var fail *rpcError
	if q := s.fails[req.Method]; len(q) > 0 {
		fail, s.fails[req.Method] = &q[0], q[1:]
	}
	s.mu.Unlock()
	if fail != nil {
		answer(w, req.ID, nil, fail)
		return
	}
	var result any
	var rerr *rpcError
	switch req.Method {
	case "version":
		result = map[string]string{"version": "0.13.99-fake"}
	case "receive":
		result, rerr = s.receive(req.Params)
	case "send":
		result, rerr = s.send(r, req.Params)
	case "sendTyping":
		result = map[string]any{}
	case "getAttachment":
		s.mu.Lock()
		b, ok := s.files[str(req.Params["id"])]
		s.mu.Unlock()
		if !ok {
			rerr = &rpcError{-1, "Could not find attachment with ID: " + str(req.Params["id"])}
		}
		result = map[string]string{"data": base64.StdEncoding.EncodeToString(b)}
	default:
		rerr = &rpcError{-32601, "Method not implemented"}
	}
	answer(w, req.ID, result, rerr)
}

func answer(w http.ResponseWriter, id, result any, e *rpcError) {
	resp := map[string]any{"jsonrpc": "2.0", "id": id, "result": result}
	if e != nil {
		resp = map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func str(v any) string { s, _ := v.(string); return s }

// receive takes what waits, up to maxMessages, waiting up to timeout for
// the first: as signal-cli's, the call goes on if its client leaves, and
// what it took is then lost. One call at a time, as signal-cli allows.
func (s *Server) receive(p map[string]any) (any, *rpcError) {
	timeout, _ := p["timeout"].(float64)
	most, _ := p["maxMessages"].(float64)
	s.mu.Lock()
	if s.receiving {
		s.mu.Unlock()
		return nil, &rpcError{-1, "Receive command cannot be used if messages are already being received."}
	}
	s.receiving = true
	s.mu.Unlock()
	deadline := time.NewTimer(time.Duration(timeout * float64(time.Second)))
	defer deadline.Stop()
	out := []map[string]any{}
	for len(out) == 0 {
		changed := s.queued.C()
		s.mu.Lock()
		n := len(s.queue)
		if most > 0 {
			n = min(n, int(most))
		}
		for _, env := range s.queue[:n] {
			out = append(out, map[string]any{"account": Account, "envelope": env})
		}
		s.queue = s.queue[n:]
		s.mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case <-changed:
			continue
		case <-deadline.C:
		case <-s.closing:
		}
		break
	}
	s.mu.Lock()
	s.receiving = false
	s.mu.Unlock()
	return out, nil
}

// send records a message, once the gate lets it through.
func (s *Server) send(r *http.Request, p map[string]any) (any, *rpcError) {
	m := Sent{Text: str(p["message"]), Group: str(p["groupId"]), VoiceNote: p["voiceNote"] == true}
	if to, ok := p["recipient"].([]any); ok && len(to) > 0 {
		m.To = str(to[0])
	}
	if m.To == "" && m.Group == "" {
		return nil, &rpcError{-32602, "No recipients given"}
	}
	if q, ok := p["quoteTimestamp"].(float64); ok {
		m.QuoteTS = int64(q)
	}
	atts, _ := p["attachments"].([]any)
	for _, a := range atts {
		f, ok := dataURI(str(a))
		if !ok {
			return nil, &rpcError{-1, "The given string is not a valid data URI."}
		}
		m.Files = append(m.Files, f)
	}
	if !s.gate.Pass(r.Context(), "send") {
		return nil, &rpcError{-3, "abandoned"}
	}
	s.mu.Lock()
	m.TS = s.now()
	s.mu.Unlock()
	s.sent.Add(m)
	return map[string]any{"timestamp": m.TS, "results": []map[string]any{{"type": "SUCCESS"}}}, nil
}

// dataURI reads data:<type>;filename=<name>;base64,<content>.
func dataURI(v string) (File, bool) {
	head, data, ok := strings.Cut(strings.TrimPrefix(v, "data:"), ",")
	parts := strings.Split(head, ";")
	if !ok || !strings.HasPrefix(v, "data:") || parts[len(parts)-1] != "base64" {
		return File{}, false
	}
	f := File{Type: parts[0]}
	for _, p := range parts[1 : len(parts)-1] {
		if k, val, _ := strings.Cut(p, "="); k == "filename" {
			f.Name, _ = url.QueryUnescape(val)
		}
	}
	b, err := base64.StdEncoding.DecodeString(data)
	f.Content = b
	return f, err == nil
}
