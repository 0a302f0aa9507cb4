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
package whatsapptest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
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

// Wait is how long WaitFor waits.
const Wait = 10 * time.Second

// Sent is a message the bot sent.
type Sent struct {
	ID, To string
	// Type is text, interactive, template, document or audio.
	Type string
	// Text is a text's body or an interactive message's.
	Text string
	// Buttons are an interactive message's reply buttons.
	Buttons []Button
	// Template is a template's name and language.
	Template, Language string
	// File is a document's or audio's uploaded file.
	File *File
	At   time.Time
}

// Button is a reply button.
type Button struct{ ID, Title string }

// File is a file the bot uploaded.
type File struct {
	Name, MimeType string
	Content        []byte
}

// Read is a read receipt the bot sent, with "typing…" or not.
type Read struct {
	Message string
	Typing  bool
}

// Failure is a queued error answer of the messages endpoint.
type Failure struct {
	Status  int
	Code    int
	Message string
}

// Status is news of a sent message, as the fake reports it.
type Status struct {
	ID, Status, To string
	// Code and Title describe a failure.
	Code  int
	Title string
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's base; APIURL the Graph API's with its version
	// (whatsapp.api_url).
	URL, APIURL string

	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	next     int
	sent     []Sent
	reads    []Read
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
	hold     int // sends let through before holding; -1 none
	waiting  int
	release  chan struct{}
}

// New starts a fake WhatsApp, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{t: t, media: map[string]personFile{}, uploads: map[string]File{}, bodies: map[string][]byte{},
		seen: map[string]time.Time{}, secret: AppSecret, now: time.Now, hold: -1, release: make(chan struct{})}
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

// Webhook points the people's side at the channel's webhook URL.
func (s *Server) Webhook(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhook = url
}

// WebhookURL is where the people's side posts.
func (s *Server) WebhookURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook
}

// Secret makes the fake sign with another app secret (a forger's).
func (s *Server) Secret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secret = secret
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

// RejectToken makes every call answer 401, as for a revoked token.
func (s *Server) RejectToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badToken = true
}

// Fail queues error answers of the messages endpoint.
func (s *Server) Fail(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f...)
}

// FailDownloads makes the next n media downloads answer 500.
func (s *Server) FailDownloads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downloadFails = n
}

// Downloads counts the media download requests.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// Sent is what the bot sent to the person to, in order.
func (s *Server) Sent(to string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, m := range s.sent {
		if m.To == to {
			out = append(out, m)
		}
	}
	return out
}

// Texts are the texts and interactive bodies sent to to, in order.
func (s *Server) Texts(to string) []string {
	var out []string
	for _, m := range s.Sent(to) {
		if m.Type == "text" || m.Type == "interactive" {
			out = append(out, m.Text)
		}
	}
	return out
}

// Reads are the read receipts sent.
func (s *Server) Reads() []Read {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reads)
}

// Count is how many messages the bot sent to to.
func (s *Server) Count(to string) int { return len(s.Sent(to)) }

// WaitFor waits until cond holds, or fails the test.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Hold lets n more sends through, then holds the rest until Release.
func (s *Server) Hold(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = n
	s.release = make(chan struct{})
}

// Release lets held sends through.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold >= 0 {
		s.hold = -1
		close(s.release)
	}
}

// Waiting is how many sends are held now.
func (s *Server) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Message is a person's message.
type Message struct {
	// From is the person's number in digits; Name their profile name.
	From, Name string
	// ID is the message id; a new one when empty.
	ID   string
	Text string
	// At is when they wrote; now (the fake's clock) when zero.
	At time.Time
	// ReplyTo is the id of a message this one replies to.
	ReplyTo string
	// File is a picture, document, video, sticker or audio, by Kind.
	File *Media
	// Press is a reply button's id pressed (an interactive reply).
	Press, PressTitle string
	// Type overrides the message's type (reaction, location, unsupported).
	Type string
	// Raw, when set, is the message's type object as is.
	Raw map[string]any
}

// Media is a file a person sends.
type Media struct {
	// Kind is image, document, video, sticker or audio.
	Kind, Name, MimeType, Caption string
	Content                       []byte
	// Voice marks an audio recorded as a voice note.
	Voice bool
	// Size is what is stated; the content's length when zero.
	Size int
}

// Sign is the X-Hub-Signature-256 Meta sends with body, made with the
// app secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Notification is a webhook body: value under one change of field
// "messages", for the number PhoneNumberID.
func Notification(value map[string]any) []byte {
	value["messaging_product"] = "whatsapp"
	value["metadata"] = map[string]string{"display_phone_number": Display, "phone_number_id": PhoneNumberID}
	b, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": "WABA1", "changes": []any{map[string]any{"field": "messages", "value": value}},
	}}})
	return b
}

// message builds the webhook body of m and returns it with m's id.
func (s *Server) message(m Message) (string, []byte) {
	s.mu.Lock()
	if m.ID == "" {
		s.next++
		m.ID = fmt.Sprintf("wamid.IN%06d", s.next)
	}
	if m.At.IsZero() {
		m.At = s.now()
	}
	if m.At.After(s.seen[m.From]) {
		s.seen[m.From] = m.At
	}
	s.mu.Unlock()
	msg := map[string]any{"from": m.From, "id": m.ID, "timestamp": strconv.FormatInt(m.At.Unix(), 10)}
	switch {
	case m.Raw != nil:
		msg["type"] = m.Type
		msg[m.Type] = m.Raw
	case m.Press != "":
		msg["type"] = "interactive"
		msg["interactive"] = map[string]any{"type": "button_reply", "button_reply": map[string]string{"id": m.Press, "title": m.PressTitle}}
	case m.File != nil:
		f := m.File
		id := s.putMedia(f)
		obj := map[string]any{"id": id, "mime_type": f.MimeType, "sha256": sum(f.Content)}
		if f.Caption != "" {
			obj["caption"] = f.Caption
		}
		if f.Kind == "document" && f.Name != "" {
			obj["filename"] = f.Name
		}
		if f.Kind == "audio" {
			obj["voice"] = f.Voice
		}
		msg["type"] = f.Kind
		msg[f.Kind] = obj
	case m.Type != "":
		msg["type"] = m.Type
	default:
		msg["type"] = "text"
		msg["text"] = map[string]string{"body": m.Text}
	}
	if m.ReplyTo != "" {
		msg["context"] = map[string]string{"from": Display, "id": m.ReplyTo}
	}
	body := Notification(map[string]any{
		"contacts": []any{map[string]any{"profile": map[string]string{"name": m.Name}, "wa_id": m.From}},
		"messages": []any{msg},
	})
	s.mu.Lock()
	s.bodies[m.ID] = body
	s.mu.Unlock()
	return m.ID, body
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// personFile is a file a person sent, with the size stated of it.
type personFile struct {
	File
	size int
}

// putMedia keeps a person's file for lookup and download.
func (s *Server) putMedia(f *Media) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	id := fmt.Sprintf("%d", 900000000+s.next)
	size := f.Size
	if size == 0 {
		size = len(f.Content)
	}
	s.media[id] = personFile{File{Name: f.Name, MimeType: f.MimeType, Content: f.Content}, size}
	return id
}

// Post posts a body to the webhook, signed with the fake's secret, and
// returns the status it was answered with.
func (s *Server) Post(t testing.TB, body []byte) int {
	t.Helper()
	s.mu.Lock()
	url, secret := s.webhook, s.secret
	s.mu.Unlock()
	return PostSigned(t, url, body, Sign(secret, body))
}

// PostSigned posts body to url with signature (none when ""), and
// returns the status it was answered with.
func PostSigned(t testing.TB, url string, body []byte, signature string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := (&http.Client{Timeout: Wait}).Do(req)
	if err != nil {
		t.Fatalf("posting to the webhook: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Send posts a person's message to the webhook and waits until it is
// taken (200), as Meta does; it returns the message's id.
func (s *Server) Send(t testing.TB, m Message) string {
	t.Helper()
	id, body := s.message(m)
	if code := s.Post(t, body); code != http.StatusOK {
		t.Fatalf("the webhook answered %d to message %s", code, id)
	}
	return id
}

// Body is the webhook body of a person's message, not posted: for a
// test that posts it itself.
func (s *Server) Body(m Message) (id string, body []byte) { return s.message(m) }

// Redeliver posts message id's notification again, as after a lost
// acknowledgement.
func (s *Server) Redeliver(t testing.TB, id string) {
	t.Helper()
	s.mu.Lock()
	body := s.bodies[id]
	s.mu.Unlock()
	if body == nil {
		t.Fatalf("no message %s to deliver again", id)
	}
	if code := s.Post(t, body); code != http.StatusOK {
		t.Fatalf("the webhook answered %d to message %s delivered again", code, id)
	}
}

// Press presses reply button b of a message the bot sent to from.
func (s *Server) Press(t testing.TB, from string, sent Sent, b Button) string {
	t.Helper()
	return s.Send(t, Message{From: from, Press: b.ID, PressTitle: b.Title, ReplyTo: sent.ID})
}

// Report posts the status of a sent message to the webhook.
func (s *Server) Report(t testing.TB, st Status) int {
	t.Helper()
	return s.Post(t, statusBody(st))
}

func statusBody(st Status) []byte {
	obj := map[string]any{"id": st.ID, "status": st.Status, "timestamp": strconv.FormatInt(time.Now().Unix(), 10), "recipient_id": st.To}
	if st.Code != 0 {
		obj["errors"] = []any{map[string]any{"code": st.Code, "title": st.Title, "message": st.Title,
			"error_data": map[string]string{"details": st.Title}}}
	}
	return Notification(map[string]any{"statuses": []any{obj}})
}

// report posts statuses in the background, as Meta does after a send.
func (s *Server) report(sts ...Status) {
	s.mu.Lock()
	url, secret := s.webhook, s.secret
	s.mu.Unlock()
	if url == "" {
		return
	}
	go func() {
		for _, st := range sts {
			body := statusBody(st)
			for range 50 {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
				resp, err := (&http.Client{Timeout: Wait}).Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
}

// apiError answers as the Graph API does.
func apiError(w http.ResponseWriter, status, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": "OAuthException", "code": code,
		"error_data": map[string]string{"messaging_product": "whatsapp", "details": message}, "fbtrace_id": "Afake"}})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// api serves the Graph API.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	bad := s.badToken
	s.mu.Unlock()
	if bad || r.Header.Get("Authorization") != "Bearer "+Token {
		apiError(w, http.StatusUnauthorized, 190, "Invalid OAuth access token - Cannot parse access token")
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/"+Version+"/")
	switch {
	case r.Method == http.MethodGet && path == PhoneNumberID:
		reply(w, map[string]string{"display_phone_number": Display, "verified_name": "loadout", "id": PhoneNumberID})
	case r.Method == http.MethodPost && path == PhoneNumberID+"/messages":
		s.messages(w, r)
	case r.Method == http.MethodPost && path == PhoneNumberID+"/media":
		s.upload(w, r)
	case r.Method == http.MethodGet && !strings.Contains(path, "/"):
		s.mu.Lock()
		f, ok := s.media[path]
		s.mu.Unlock()
		if !ok {
			apiError(w, http.StatusBadRequest, 100, "Unsupported get request. Object with ID '"+path+"' does not exist")
			return
		}
		reply(w, map[string]any{"messaging_product": "whatsapp", "url": s.URL + "/download/" + path, "mime_type": f.MimeType,
			"sha256": sum(f.Content), "file_size": strconv.Itoa(f.size), "id": path})
	default:
		apiError(w, http.StatusBadRequest, 100, "Unsupported request")
	}
}

// download serves a person's file, with the token, as lookaside does.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.downloads++
	fail := s.downloadFails > 0
	if fail {
		s.downloadFails--
	}
	f, ok := s.media[strings.TrimPrefix(r.URL.Path, "/download/")]
	s.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+Token:
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	case fail:
		http.Error(w, "try again", http.StatusInternalServerError)
	case !ok:
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", f.MimeType)
		w.Write(f.Content)
	}
}

// upload takes a file the bot uploads.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(200 << 20); err != nil {
		apiError(w, http.StatusBadRequest, 100, "bad upload: "+err.Error())
		return
	}
	if r.FormValue("messaging_product") != "whatsapp" || r.FormValue("type") == "" {
		apiError(w, http.StatusBadRequest, 100, "Param messaging_product and type are required")
		return
	}
	file, h, err := r.FormFile("file")
	if err != nil {
		apiError(w, http.StatusBadRequest, 100, "Param file is required")
		return
	}
	defer file.Close()
	content, _ := io.ReadAll(file)
	mt, _, _ := mime.ParseMediaType(h.Header.Get("Content-Type"))
	s.mu.Lock()
	s.next++
	id := fmt.Sprintf("%d", 800000000+s.next)
	s.uploads[id] = File{Name: h.Filename, MimeType: mt, Content: content}
	s.mu.Unlock()
	reply(w, map[string]string{"id": id})
}

// outgoing is a message the bot sends.
type outgoing struct {
	Product       string `json:"messaging_product"`
	RecipientType string `json:"recipient_type"`
	To            string `json:"to"`
	Type          string `json:"type"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	Typing        *struct {
		Type string `json:"type"`
	} `json:"typing_indicator"`
	Text *struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	} `json:"text"`
	Interactive *struct {
		Type string `json:"type"`
		Body struct {
			Text string `json:"text"`
		} `json:"body"`
		Action struct {
			Buttons []struct {
				Type  string `json:"type"`
				Reply Button `json:"reply"`
			} `json:"buttons"`
		} `json:"action"`
	} `json:"interactive"`
	Template *struct {
		Name     string `json:"name"`
		Language struct {
			Code string `json:"code"`
		} `json:"language"`
	} `json:"template"`
	Document *struct {
		ID       string `json:"id"`
		Filename string `json:"filename"`
	} `json:"document"`
	Audio *struct {
		ID string `json:"id"`
	} `json:"audio"`
}

// Meta's limits on what a message holds.
const (
	maxText        = 4096
	maxInteractive = 1024
	maxButtons     = 3
	maxTitle       = 20
)

// messages serves the messages endpoint: a read receipt, or a message.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var m outgoing
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		apiError(w, http.StatusBadRequest, 100, "Invalid parameter: "+err.Error())
		return
	}
	if m.Product != "whatsapp" {
		apiError(w, http.StatusBadRequest, 100, "The parameter messaging_product is required.")
		return
	}
	if m.Status == "read" {
		s.mu.Lock()
		s.reads = append(s.reads, Read{Message: m.MessageID, Typing: m.Typing != nil && m.Typing.Type == "text"})
		s.mu.Unlock()
		reply(w, map[string]bool{"success": true})
		return
	}
	out := Sent{To: m.To, Type: m.Type}
	switch {
	case m.To == "":
		apiError(w, http.StatusBadRequest, 100, "The parameter to is required.")
		return
	case m.Type == "text" && m.Text != nil:
		if n := utf8.RuneCountInString(m.Text.Body); n == 0 || n > maxText {
			apiError(w, http.StatusBadRequest, 100, fmt.Sprintf("Param text['body'] must be at most %d characters long, got %d", maxText, n))
			return
		}
		out.Text = m.Text.Body
	case m.Type == "interactive" && m.Interactive != nil && m.Interactive.Type == "button":
		it := m.Interactive
		if n := utf8.RuneCountInString(it.Body.Text); n == 0 || n > maxInteractive {
			apiError(w, http.StatusBadRequest, 100, fmt.Sprintf("Param interactive['body']['text'] must be at most %d characters long, got %d", maxInteractive, n))
			return
		}
		if n := len(it.Action.Buttons); n == 0 || n > maxButtons {
			apiError(w, http.StatusBadRequest, 100, fmt.Sprintf("Param interactive['action']['buttons'] must have 1 to %d items, got %d", maxButtons, n))
			return
		}
		for _, b := range it.Action.Buttons {
			if b.Type != "reply" || b.Reply.ID == "" || len(b.Reply.ID) > 256 || utf8.RuneCountInString(b.Reply.Title) > maxTitle {
				apiError(w, http.StatusBadRequest, 100, fmt.Sprintf("Invalid button %+v (title at most %d characters)", b, maxTitle))
				return
			}
			out.Buttons = append(out.Buttons, b.Reply)
		}
		out.Text = it.Body.Text
	case m.Type == "template" && m.Template != nil:
		out.Template, out.Language = m.Template.Name, m.Template.Language.Code
	case m.Type == "document" && m.Document != nil, m.Type == "audio" && m.Audio != nil:
		id := ""
		if m.Document != nil {
			id = m.Document.ID
		} else {
			id = m.Audio.ID
		}
		s.mu.Lock()
		f, ok := s.uploads[id]
		s.mu.Unlock()
		if !ok {
			apiError(w, http.StatusBadRequest, 100, "No media with id "+id)
			return
		}
		if m.Document != nil && m.Document.Filename != "" {
			f.Name = m.Document.Filename
		}
		out.File = &f
	default:
		apiError(w, http.StatusBadRequest, 100, "Unsupported message type "+m.Type)
		return
	}
	s.mu.Lock()
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		s.mu.Unlock()
		apiError(w, f.Status, f.Code, f.Message)
		return
	}
	held := false
	if s.hold == 0 {
		held = true
		s.waiting++
	} else if s.hold > 0 {
		s.hold--
	}
	release := s.release
	s.mu.Unlock()
	if held {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return // abandoned: never sent
		}
	}
	s.mu.Lock()
	s.next++
	out.ID = fmt.Sprintf("wamid.OUT%06d", s.next)
	out.At = s.now()
	closed := s.window && out.Type != "template" && out.At.Sub(s.seen[out.To]) >= 24*time.Hour
	if !closed {
		s.sent = append(s.sent, out)
	}
	statuses := s.statuses
	s.mu.Unlock()
	reply(w, map[string]any{"messaging_product": "whatsapp", "contacts": []any{map[string]string{"input": m.To, "wa_id": m.To}},
		"messages": []any{map[string]string{"id": out.ID}}})
	switch {
	case closed:
		s.report(Status{ID: out.ID, Status: "failed", To: out.To, Code: 131047,
			Title: "Re-engagement message"})
	case statuses:
		s.report(Status{ID: out.ID, Status: "sent", To: out.To}, Status{ID: out.ID, Status: "delivered", To: out.To},
			Status{ID: out.ID, Status: "read", To: out.To})
	}
}

// Uploads are the files the bot sent to to, name → content.
func (s *Server) Uploads(to string) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range s.Sent(to) {
		if m.File != nil {
			out[m.File.Name] = m.File.Content
		}
	}
	return out
}
