// Package feishutest is a fake Feishu for tests: the open-apis a bot
// calls (this file), and the people (people.go), whose messages and
// card presses it posts to the callback encrypted and signed as Feishu
// does. The record, the gate and the wait are bridgetest's kit.
package feishutest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"unicode/utf8"

	"loadout/bridge/bridgetest"
)

// Credentials the fake takes, the bot's open id, WaitFor's wait.
const (
	AppID             = "cli_a00000000000test"
	AppSecret         = "appsecretfortests0123456789abcdef"
	VerificationToken = "verification-token-for-tests"
	EncryptKey        = "encrypt-key-for-tests"
	BotOpenID         = "ou_bot00000000000000000000000000"
	Wait              = bridgetest.Wait
)

// Sent is a message the bot sent to To (an open id or a chat id): a
// post's Markdown (as edited last), a card's with its buttons, or a
// file (its Name, Content and upload's FileType).
type Sent struct {
	ID, To, Type, Text, Name, FileType string
	Buttons                            []Button
	Content                            []byte
}

// Button is a card's button.
type Button struct {
	Label string
	Value map[string]any
}

// Server is the fake, at URL (feishu.api_url), safe for concurrent use;
// people post to CallbackURL, which is set before they do.
type Server struct {
	URL, CallbackURL string
	srv              *httptest.Server
	// sent: what the bot sent (notified at edits too); gate holds sends.
	sent bridgetest.Recorder[Sent]
	gate bridgetest.Gate

	mu                sync.Mutex
	next              int
	token             string
	texts, uuids      map[string]string // text by message id, as edited; message id by uuid
	uploads           map[string]Sent
	resources, bodies map[string][]byte // people's files by message id/key; events by id
}

// New starts a fake Feishu, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{texts: map[string]string{}, uuids: map[string]string{}, uploads: map[string]Sent{},
		resources: map[string][]byte{}, bodies: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", s.tenantToken)
	mux.HandleFunc("GET /open-apis/bot/v3/info", s.authed(func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"code": 0, "bot": map[string]any{"open_id": BotOpenID, "app_name": "loadout"}})
	}))
	mux.HandleFunc("POST /open-apis/im/v1/messages", s.authed(s.message))
	mux.HandleFunc("PUT /open-apis/im/v1/messages/{id}", s.authed(s.message))
	mux.HandleFunc("POST /open-apis/im/v1/files", s.authed(s.upload))
	mux.HandleFunc("GET /open-apis/im/v1/messages/{id}/resources/{key}", s.authed(s.resource))
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.Release()
		s.srv.Close()
	})
	return s
}

// apiError and reply answer as the open platform does.
func apiError(w http.ResponseWriter, status, code int, msg string) {
	w.WriteHeader(status)
	reply(w, map[string]any{"code": code, "msg": msg})
}

func reply(w http.ResponseWriter, v any) { json.NewEncoder(w).Encode(v) }

// tenantToken issues a new token for the app's credentials.
func (s *Server) tenantToken(w http.ResponseWriter, r *http.Request) {
	var c map[string]string
	if json.NewDecoder(r.Body).Decode(&c); c["app_id"] != AppID || c["app_secret"] != AppSecret {
		apiError(w, http.StatusBadRequest, 10014, "app secret invalid")
		return
	}
	s.mu.Lock()
	s.next++
	token := fmt.Sprintf("t-g1044test%030d", s.next)
	s.token = token
	s.mu.Unlock()
	reply(w, map[string]any{"code": 0, "tenant_access_token": token, "expire": 7200})
}

// authed serves h to requests with the current token only.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ok := s.token != "" && r.Header.Get("Authorization") == "Bearer "+s.token
		s.mu.Unlock()
		if !ok {
			apiError(w, http.StatusBadRequest, 99991663, "Invalid access token for authorization.")
			return
		}
		h(w, r)
	}
}

// message sends a post, card or file, once per uuid; PUT edits a post.
func (s *Server) message(w http.ResponseWriter, r *http.Request) {
	var m struct {
		ReceiveID string `json:"receive_id"`
		MsgType   string `json:"msg_type"`
		Content   string `json:"content"`
		UUID      string `json:"uuid"`
	}
	err := json.NewDecoder(r.Body).Decode(&m)
	out, ok := s.content(m.MsgType, m.Content)
	id, kind := r.PathValue("id"), r.URL.Query().Get("receive_id_type")
	s.mu.Lock()
	if _, known := s.texts[id]; r.Method == http.MethodPut && ok && known && m.MsgType == "post" {
		s.texts[id] = out.Text
		s.mu.Unlock()
		s.sent.Notify()
		reply(w, map[string]any{"code": 0})
		return
	}
	s.mu.Unlock()
	if err != nil || r.Method == http.MethodPut || m.ReceiveID == "" || (kind != "open_id" && kind != "chat_id") || len(m.UUID) > 50 || !ok {
		apiError(w, http.StatusBadRequest, 230001, "invalid receive_id, uuid or content")
		return
	}
	if !s.gate.Pass(r.Context(), "") || r.Context().Err() != nil {
		return // abandoned: never sent
	}
	s.mu.Lock()
	id, dup := s.uuids[m.UUID]
	if !dup {
		s.next++
		id = fmt.Sprintf("om_out%06d", s.next)
		out.ID, out.To, s.texts[id] = id, m.ReceiveID, out.Text
		if m.UUID != "" {
			s.uuids[m.UUID] = id
		}
		s.sent.Add(out) // under mu: in the order of the ids
	}
	s.mu.Unlock()
	reply(w, map[string]any{"code": 0, "data": map[string]any{"message_id": id}})
}

// content reads a message's content as Feishu checks it.
func (s *Server) content(kind, raw string) (Sent, bool) {
	out := Sent{Type: kind}
	var c struct {
		ZhCN     struct{ Content [][]struct{ Text string } } `json:"zh_cn"`
		Elements []struct {
			Content string
			Actions []struct {
				Text  struct{ Content string }
				Value map[string]any
			}
		}
		FileKey string `json:"file_key"`
	}
	if json.Unmarshal([]byte(raw), &c) != nil || len(raw) > 150<<10 || (kind == "interactive" && len(raw) > 30<<10) {
		return out, false
	}
	for _, para := range c.ZhCN.Content {
		for _, el := range para {
			out.Text += el.Text
		}
	}
	for _, e := range c.Elements {
		out.Text += e.Content
		for _, b := range e.Actions {
			out.Buttons = append(out.Buttons, Button{b.Text.Content, b.Value})
		}
	}
	s.mu.Lock()
	f, ok := s.uploads[c.FileKey]
	s.mu.Unlock()
	if kind == "file" {
		f.ID, f.Type = out.ID, kind
		return f, ok
	}
	return out, (kind == "post" || kind == "interactive") && out.Text != "" && utf8.ValidString(out.Text)
}

// upload takes a file the bot uploads.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	file, _, err := r.FormFile("file")
	if err != nil || r.FormValue("file_type") == "" || r.FormValue("file_name") == "" {
		apiError(w, http.StatusBadRequest, 234001, "file, file_type and file_name are required")
		return
	}
	content, _ := io.ReadAll(file)
	key := s.id("file_v3_")
	s.mu.Lock()
	s.uploads[key] = Sent{Name: r.FormValue("file_name"), FileType: r.FormValue("file_type"), Content: content}
	s.mu.Unlock()
	reply(w, map[string]any{"code": 0, "data": map[string]string{"file_key": key}})
}

// resource serves a file of a person's message.
func (s *Server) resource(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.resources[r.PathValue("id")+"/"+r.PathValue("key")]
	s.mu.Unlock()
	if t := r.URL.Query().Get("type"); !ok || (t != "file" && t != "image") {
		apiError(w, http.StatusBadRequest, 234003, "file not in message")
		return
	}
	w.Header().Set("Content-Type", http.DetectContentType(b))
	w.Write(b)
}

// SentTo is what the bot sent to to, in order.
func (s *Server) SentTo(to string) []Sent {
	out := s.sent.Filter(func(m Sent) bool { return m.To == to })
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range out {
		out[i].Text = s.texts[out[i].ID]
	}
	return out
}

// Hold lets n more sends through, then holds the rest until Release.
func (s *Server) Hold(n int)   { s.gate.Hold("", n) }
func (s *Server) Release()     { s.gate.Release("") }
func (s *Server) Waiting() int { return s.gate.Waiting("") }

// WaitFor waits until cond holds, or fails the test.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, what, &s.sent.Signal, cond)
}
