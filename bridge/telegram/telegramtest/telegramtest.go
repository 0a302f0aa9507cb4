// Package telegramtest is a fake Telegram Bot API server for tests. It
// speaks the wire format the real client library uses (form-encoded POSTs
// to /bot<token>/<method>, JSON answers), queues updates for getUpdates
// with real long polling and offset confirmation, records every message,
// chat action and command menu it receives, checks HTML formatting the way
// Telegram does, and can be scripted to fail or pause a method.
package telegramtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"
)

// Token is the bot token the server accepts.
const Token = "123456:TEST-token"

// Bot identity reported by getMe.
const (
	BotID       int64 = 777000
	BotUserName       = "loadout_bot"
)

// MaxMessage is Telegram's limit on a message's text, in UTF-16 units
// after entity parsing.
const MaxMessage = 4096

// User is a person writing to the bot.
type User struct {
	ID        int64
	UserName  string
	FirstName string
}

// Message is an inbound message to queue as an update.
type Message struct {
	From User
	// ChatID defaults to From.ID (a private chat).
	ChatID int64
	// ChatType is "private" (default), "group" or "supergroup".
	ChatType string
	Text     string
	// ThreadID and Topic mark a message in a forum topic.
	ThreadID int
	Topic    bool
	// ReplyToBot makes the message a reply to one of the bot's messages.
	ReplyToBot bool
	// Document or Photo attach a file, which the bot can download; Text
	// is then the caption.
	Document *File
	Photo    *File
	// Voice, Audio or VideoNote attach a recording of Seconds length.
	Voice, Audio, VideoNote *File
	Seconds                 int
}

// File is a file a person sends, or one the bot uploaded.
type File struct {
	Name    string
	MIME    string
	Content []byte
	// Stated is the size the update states; 0 states the content's.
	Stated int
}

// size is the size the update states for f.
func (f File) size() int {
	if f.Stated != 0 {
		return f.Stated
	}
	return len(f.Content)
}

// Upload is one file the bot sent (sendDocument, sendPhoto or
// sendVoice).
type Upload struct {
	Method   string
	ChatID   string
	ThreadID string
	ReplyTo  string
	File
}

// Sent is one sendMessage call the server accepted.
type Sent struct {
	// MessageID is the id the message got; Edits counts the
	// editMessageText calls that changed it since.
	MessageID int
	Edits     int
	// At is when the message was sent.
	At        time.Time
	ChatID    int64
	ThreadID  int
	Text      string
	ParseMode string
	ReplyTo   int
	// Buttons are the inline keyboard's buttons, row after row, as
	// text and callback data; an edit without reply_markup removes them.
	Buttons []Button
}

// Button is one inline keyboard button.
type Button struct {
	Text string `json:"text"`
	Data string `json:"callback_data"`
}

// buttons reads a reply_markup's inline keyboard.
func buttons(markup string) []Button {
	var m struct {
		Keyboard [][]Button `json:"inline_keyboard"`
	}
	_ = json.Unmarshal([]byte(markup), &m)
	var out []Button
	for _, row := range m.Keyboard {
		out = append(out, row...)
	}
	return out
}

// Call is any request the server received, accepted or not.
type Call struct {
	Method string
	Params url.Values
}

type failure struct {
	code       int
	desc       string
	retryAfter int
}

// Server is the fake Bot API. It is safe for concurrent use.
type Server struct {
	// URL is the server's base URL.
	URL string

	srv  *httptest.Server
	quit chan struct{}

	mu           sync.Mutex
	changed      chan struct{}
	nextID       int
	nextMsg      int
	nextCallback int
	updates      []json.RawMessage
	ids          []int
	pushed       map[int][]byte    // every update Push queued, by id
	resend       []json.RawMessage // delivered again by the next getUpdates
	calls        []Call
	sent         []Sent
	files        map[string]File // by file_id
	uploads      []Upload
	fails        map[string][]failure
	paused       map[string]chan struct{}
	through      map[string]int // calls of a held method still let through
	waiting      map[string]int
	webhook      string // the URL setWebhook set, until deleteWebhook
	conns        atomic.Int32
}

// Conns returns how many connections clients have opened to the server.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// New starts a server on 127.0.0.1, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{
		quit: make(chan struct{}), changed: make(chan struct{}), nextID: 1000, nextMsg: 1,
		fails: map[string][]failure{}, paused: map[string]chan struct{}{}, through: map[string]int{}, waiting: map[string]int{},
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(func() {
		close(s.quit)
		s.srv.Close()
	})
	return s
}

// SetWebhook sets a webhook as an earlier run in webhook mode left it:
// getUpdates conflicts until deleteWebhook.
func (s *Server) SetWebhook(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhook = url
}

// Uploads returns the files the bot sent.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload(nil), s.uploads...)
}

// Endpoint is the api_endpoint format pointing at this server.
func (s *Server) Endpoint() string { return s.URL + "/bot%s/%s" }

// Push queues m as an update and returns its update id.
func (s *Server) Push(m Message) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	u := s.updateJSON(id, m)
	if s.pushed == nil {
		s.pushed = map[int][]byte{}
	}
	s.pushed[id] = u
	s.updates = append(s.updates, u)
	s.ids = append(s.ids, id)
	s.notify()
	return id
}

// Resend delivers update id again in the next getUpdates answer,
// whatever its offset confirmed: what a bot sees when Telegram did not
// take its confirmation.
func (s *Server) Resend(id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resend = append(s.resend, s.pushed[id])
	s.notify()
}

// Requeue queues m again under an update id already used, as Telegram
// does when the bot asks without an offset after losing it.
func (s *Server) Requeue(id int, m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, s.updateJSON(id, m))
	s.ids = append(s.ids, id)
	s.notify()
}

// PushRaw queues an update given as raw JSON (any fields, however odd),
// with a new update id, and returns the id.
func (s *Server) PushRaw(update string) int {
	var m map[string]any
	if err := json.Unmarshal([]byte(update), &m); err != nil {
		panic(fmt.Sprintf("telegramtest: PushRaw: %v", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	m["update_id"] = id
	b, _ := json.Marshal(m)
	s.updates = append(s.updates, b)
	s.ids = append(s.ids, id)
	s.notify()
	return id
}

// Update returns m as the JSON of an update with a new id, without
// queueing it: what Telegram posts to a webhook.
func (s *Server) Update(m Message) (int, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	return id, s.updateJSON(id, m)
}

func (s *Server) updateJSON(id int, m Message) []byte {
	if m.ChatID == 0 {
		m.ChatID = m.From.ID
	}
	if m.ChatType == "" {
		m.ChatType = "private"
	}
	msgID := s.nextMsg
	s.nextMsg++
	from := map[string]any{"id": m.From.ID, "is_bot": false, "first_name": cmp.Or(m.From.FirstName, "Person")}
	if m.From.UserName != "" {
		from["username"] = m.From.UserName
	}
	chat := map[string]any{"id": m.ChatID, "type": m.ChatType}
	if m.ChatType == "private" {
		chat["first_name"] = from["first_name"]
	} else {
		chat["title"] = "Test group"
	}
	msg := map[string]any{
		"message_id": msgID, "date": time.Now().Unix(), "from": from, "chat": chat, "text": m.Text,
	}
	if ents := entities(m.Text); len(ents) > 0 {
		msg["entities"] = ents
	}
	if m.Document != nil || m.Photo != nil || m.Voice != nil || m.Audio != nil || m.VideoNote != nil {
		delete(msg, "text")
		delete(msg, "entities")
		if m.Text != "" {
			msg["caption"] = m.Text
			if ents := entities(m.Text); len(ents) > 0 {
				msg["caption_entities"] = ents
			}
		}
		if s.files == nil {
			s.files = map[string]File{}
		}
		fid := fmt.Sprintf("file-%d", id)
		for key, f := range map[string]*File{"voice": m.Voice, "audio": m.Audio, "video_note": m.VideoNote} {
			if f == nil {
				continue
			}
			s.files[fid] = *f
			att := map[string]any{"file_id": fid, "file_unique_id": "u" + fid, "duration": m.Seconds, "file_size": f.size()}
			if f.MIME != "" {
				att["mime_type"] = f.MIME
			}
			if f.Name != "" {
				att["file_name"] = f.Name
			}
			msg[key] = att
		}
		switch {
		case m.Voice != nil || m.Audio != nil || m.VideoNote != nil:
		case m.Document != nil:
			s.files[fid] = *m.Document
			msg["document"] = map[string]any{"file_id": fid, "file_unique_id": "u" + fid, "file_name": m.Document.Name,
				"mime_type": m.Document.MIME, "file_size": m.Document.size()}
		default:
			s.files[fid] = *m.Photo
			msg["photo"] = []map[string]any{
				{"file_id": fid + "-small", "file_unique_id": "small" + fid, "width": 90, "height": 90, "file_size": 10},
				{"file_id": fid, "file_unique_id": "u" + fid, "width": 800, "height": 800, "file_size": m.Photo.size()},
			}
		}
	}
	if m.ThreadID != 0 {
		msg["message_thread_id"] = m.ThreadID
	}
	if m.Topic {
		msg["is_topic_message"] = true
	}
	if m.ReplyToBot {
		msg["reply_to_message"] = map[string]any{
			"message_id": msgID + 100000, "date": time.Now().Unix(), "chat": chat, "text": "earlier answer",
			"from": map[string]any{"id": BotID, "is_bot": true, "first_name": "loadout", "username": BotUserName},
		}
	}
	b, err := json.Marshal(map[string]any{"update_id": id, "message": msg})
	if err != nil {
		panic(err)
	}
	return b
}

// entities marks @mentions and a leading /command the way Telegram does.
func entities(text string) []map[string]any {
	var out []map[string]any
	u := utf16.Encode([]rune(text))
	for i := 0; i < len(u); i++ {
		if u[i] != '@' && !(u[i] == '/' && i == 0) {
			continue
		}
		if i > 0 && !isSpace(u[i-1]) {
			continue
		}
		j := i + 1
		for j < len(u) && (isWord(u[j]) || (u[i] == '/' && u[j] == '@')) {
			j++
		}
		if j == i+1 {
			continue
		}
		kind := "mention"
		if u[i] == '/' {
			kind = "bot_command"
		}
		out = append(out, map[string]any{"type": kind, "offset": i, "length": j - i})
		i = j - 1
	}
	return out
}

func isSpace(c uint16) bool { return c == ' ' || c == '\n' || c == '\t' }
func isWord(c uint16) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// FailNext makes the next call of method answer with an error: code,
// description, and retry_after seconds when retryAfter > 0. Calls queue.
func (s *Server) FailNext(method string, code int, description string, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[method] = append(s.fails[method], failure{code, description, retryAfter})
}

// Pause makes calls of method wait until Resume, or until the client gives
// up. A call abandoned by its client is not recorded as sent.
func (s *Server) Pause(method string) { s.Hold(method, 0) }

// Hold lets the next after calls of method through and makes later ones
// wait, as Pause does.
func (s *Server) Hold(method string, after int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.paused[method]; !ok {
		s.paused[method] = make(chan struct{})
	}
	s.through[method] = after
}

// Resume lets paused calls of method go on.
func (s *Server) Resume(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.paused[method]; ok {
		close(ch)
		delete(s.paused, method)
		delete(s.through, method)
	}
}

// Waiting returns how many calls of method are held by Pause right now.
func (s *Server) Waiting(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[method]
}

// Sent returns the messages sent so far, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Calls returns every call of method ("" for all), in order.
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

// Confirmed reports whether the bot confirmed update id, by asking for
// updates with a higher offset.
func (s *Server) Confirmed(id int) bool {
	for _, c := range s.Calls("getUpdates") {
		if off, _ := strconv.Atoi(c.Params.Get("offset")); off > id {
			return true
		}
	}
	return false
}

// WaitFor waits until cond holds, checking after every request the server
// receives; it fails the test after 10 seconds.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	// cond may watch something besides this server (a metric, a
	// database row), so it is checked on a tick too.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("telegramtest: timed out waiting for %s", what)
		}
	}
}

// WaitSent waits until at least n messages were sent and returns them.
func (s *Server) WaitSent(t testing.TB, n int) []Sent {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d sent messages", n), func() bool { return len(s.Sent()) >= n })
	return s.Sent()
}

// notify wakes WaitFor; s.mu must be held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, isFile := strings.CutPrefix(r.URL.Path, "/file/bot"+Token+"/"); isFile {
		s.mu.Lock()
		f, ok := s.files[strings.TrimPrefix(rest, "documents/")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(f.Content)
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
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: r.PostForm})
	s.notify()
	var fail *failure
	if q := s.fails[method]; len(q) > 0 {
		fail = &q[0]
		s.fails[method] = q[1:]
	}
	pause, paused := s.paused[method]
	if paused && s.through[method] > 0 {
		s.through[method]--
		paused = false
	}
	if paused {
		s.waiting[method]++
	}
	s.mu.Unlock()

	if !ok || token != Token {
		writeErr(w, 401, "Unauthorized", 0)
		return
	}
	if paused {
		select {
		case <-pause:
		case <-r.Context().Done():
		case <-s.quit:
		}
		s.mu.Lock()
		s.waiting[method]--
		s.notify()
		s.mu.Unlock()
		if r.Context().Err() != nil {
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
		s.mu.Lock()
		f, ok := s.files[r.PostForm.Get("file_id")]
		s.mu.Unlock()
		if !ok {
			writeErr(w, 400, "Bad Request: invalid file_id", 0)
			return
		}
		writeOK(w, map[string]any{"file_id": r.PostForm.Get("file_id"), "file_size": len(f.Content), "file_path": "documents/" + r.PostForm.Get("file_id")})
	case "sendDocument", "sendPhoto", "sendVoice":
		field := map[string]string{"sendDocument": "document", "sendPhoto": "photo", "sendVoice": "voice"}[method]
		fh := r.MultipartForm.File[field]
		if len(fh) != 1 {
			writeErr(w, 400, "Bad Request: there is no "+field+" in the request", 0)
			return
		}
		f, _ := fh[0].Open()
		content, _ := io.ReadAll(f)
		f.Close()
		s.mu.Lock()
		s.uploads = append(s.uploads, Upload{Method: method, ChatID: r.PostForm.Get("chat_id"), ThreadID: r.PostForm.Get("message_thread_id"),
			ReplyTo: r.PostForm.Get("reply_to_message_id"),
			File:    File{Name: fh[0].Filename, MIME: fh[0].Header.Get("Content-Type"), Content: content}})
		id := s.nextMsg
		s.nextMsg++
		s.notify()
		s.mu.Unlock()
		writeOK(w, map[string]any{"message_id": id, "date": time.Now().Unix(), "chat": map[string]any{"id": r.PostForm.Get("chat_id"), "type": "private"}})
	case "setWebhook", "deleteWebhook":
		s.mu.Lock()
		s.webhook = r.PostForm.Get("url")
		s.mu.Unlock()
		writeOK(w, true)
	case "sendChatAction", "setMyCommands", "answerCallbackQuery":
		writeOK(w, true)
	default:
		writeErr(w, 404, "Not Found", 0)
	}
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	hooked := s.webhook != ""
	s.mu.Unlock()
	if hooked {
		// What the Bot API answers while a webhook is set.
		writeErr(w, 409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first", 0)
		return
	}
	offset, _ := strconv.Atoi(r.PostForm.Get("offset"))
	timeout, _ := strconv.Atoi(r.PostForm.Get("timeout"))
	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		s.mu.Lock()
		// Asking with an offset confirms every update below it.
		for len(s.ids) > 0 && offset > 0 && s.ids[0] < offset {
			s.ids, s.updates = s.ids[1:], s.updates[1:]
		}
		if len(s.updates) > 0 || len(s.resend) > 0 || timeout == 0 {
			var out []json.RawMessage
			for _, u := range s.resend {
				out = append(out, u)
			}
			s.resend = nil
			for _, u := range s.updates {
				out = append(out, u)
			}
			s.mu.Unlock()
			writeOK(w, out)
			return
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			writeOK(w, []json.RawMessage{})
			return
		case <-r.Context().Done():
			return
		case <-s.quit:
			return
		}
	}
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	chatID, err := strconv.ParseInt(f.Get("chat_id"), 10, 64)
	if err != nil {
		writeErr(w, 400, "Bad Request: chat not found", 0)
		return
	}
	text := f.Get("text")
	visible, ok := checkText(w, text, f.Get("parse_mode"), "message is too long")
	if !ok {
		return
	}
	thread, _ := strconv.Atoi(f.Get("message_thread_id"))
	reply, _ := strconv.Atoi(f.Get("reply_to_message_id"))
	s.mu.Lock()
	id := s.nextMsg
	s.sent = append(s.sent, Sent{MessageID: id, At: time.Now(), ChatID: chatID, ThreadID: thread, Text: text, ParseMode: f.Get("parse_mode"), ReplyTo: reply,
		Buttons: buttons(f.Get("reply_markup"))})
	s.nextMsg++
	s.notify()
	s.mu.Unlock()
	writeOK(w, map[string]any{
		"message_id": id, "date": time.Now().Unix(), "text": visible,
		"chat": map[string]any{"id": chatID, "type": "private"},
		"from": map[string]any{"id": BotID, "is_bot": true, "first_name": "loadout", "username": BotUserName},
	})
}

// checkText refuses a message text as Telegram does (bad HTML, empty,
// too long, which sendMessage and editMessageText word differently) and
// returns what the person would see.
func checkText(w http.ResponseWriter, text, parseMode, tooLong string) (string, bool) {
	visible := text
	if strings.EqualFold(parseMode, "HTML") {
		v, err := CheckHTML(text)
		if err != nil {
			writeErr(w, 400, "Bad Request: can't parse entities: "+err.Error(), 0)
			return "", false
		}
		visible = v
	}
	if strings.TrimSpace(visible) == "" {
		writeErr(w, 400, "Bad Request: message text is empty", 0)
		return "", false
	}
	if len(utf16.Encode([]rune(visible))) > MaxMessage {
		writeErr(w, 400, "Bad Request: "+tooLong, 0)
		return "", false
	}
	return visible, true
}

// editMessageText changes a sent message's text as Telegram does,
// refusing an edit that changes nothing.
func (s *Server) editMessageText(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	chatID, _ := strconv.ParseInt(f.Get("chat_id"), 10, 64)
	id, _ := strconv.Atoi(f.Get("message_id"))
	text := f.Get("text")
	visible, ok := checkText(w, text, f.Get("parse_mode"), "MESSAGE_TOO_LONG")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.sent {
		m := &s.sent[i]
		if m.MessageID != id || m.ChatID != chatID {
			continue
		}
		if m.Text == text && m.ParseMode == f.Get("parse_mode") && len(m.Buttons) == len(buttons(f.Get("reply_markup"))) {
			writeErr(w, 400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message", 0)
			return
		}
		m.Text, m.ParseMode, m.Buttons = text, f.Get("parse_mode"), buttons(f.Get("reply_markup"))
		m.Edits++
		s.notify()
		writeOK(w, map[string]any{"message_id": id, "date": time.Now().Unix(), "text": visible,
			"chat": map[string]any{"id": chatID, "type": "private"}})
		return
	}
	writeErr(w, 400, "Bad Request: message to edit not found", 0)
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

// allowedTags are the HTML tags Telegram accepts in parse_mode HTML.
var allowedTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true, "s": true,
	"strike": true, "del": true, "a": true, "code": true, "pre": true, "tg-spoiler": true,
	"span": true, "blockquote": true,
}

// CheckHTML parses text as Telegram's HTML parse mode does: only known
// tags, properly nested and closed, and only the entities &lt; &gt; &amp;
// &quot; and numeric ones. It returns the visible text.
func CheckHTML(text string) (string, error) {
	var out strings.Builder
	var stack []string
	for i := 0; i < len(text); {
		switch text[i] {
		case '<':
			j := strings.IndexByte(text[i:], '>')
			if j < 0 {
				return "", fmt.Errorf("unclosed start tag at byte offset %d", i)
			}
			tag := text[i+1 : i+j]
			if strings.HasPrefix(tag, "/") {
				name := strings.TrimSpace(tag[1:])
				if len(stack) == 0 || stack[len(stack)-1] != name {
					return "", fmt.Errorf("unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, last(stack), name)
				}
				stack = stack[:len(stack)-1]
			} else {
				name, _, _ := strings.Cut(tag, " ")
				if !allowedTags[name] {
					return "", fmt.Errorf("unsupported start tag %q at byte offset %d", name, i)
				}
				if top := last(stack); top == "code" || (top == "pre" && name != "code") || (name == "a" && contains(stack, "a")) {
					return "", fmt.Errorf("can't nest %q in %q at byte offset %d", name, top, i)
				}
				stack = append(stack, name)
			}
			i += j + 1
		case '&':
			j := strings.IndexByte(text[i:], ';')
			if j < 0 {
				return "", fmt.Errorf("unclosed entity at byte offset %d", i)
			}
			ent := text[i+1 : i+j]
			switch {
			case ent == "lt":
				out.WriteByte('<')
			case ent == "gt":
				out.WriteByte('>')
			case ent == "amp":
				out.WriteByte('&')
			case ent == "quot":
				out.WriteByte('"')
			case strings.HasPrefix(ent, "#"):
				n, err := strconv.Atoi(strings.TrimPrefix(ent, "#"))
				if err != nil {
					return "", fmt.Errorf("bad numeric entity at byte offset %d", i)
				}
				out.WriteRune(rune(n))
			default:
				return "", fmt.Errorf("unsupported entity %q at byte offset %d", ent, i)
			}
			i += j + 1
		case '>':
			return "", fmt.Errorf("unescaped '>' at byte offset %d", i)
		default:
			out.WriteByte(text[i])
			i++
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("can't find end tag corresponding to start tag %q", last(stack))
	}
	return out.String(), nil
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
