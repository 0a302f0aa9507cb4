package telegramtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// The methods that send: sendMessage and editMessageText, which refuse
// a text as Telegram does and keep what the person sees.
//
// The messages sent are not a bridgetest.Recorder: editMessageText
// changes them where they are, and a recorder only adds.

// MaxMessage is Telegram's limit on a message's text, in UTF-16 units
// after entity parsing.
const MaxMessage = 4096

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

// Sent returns the messages sent so far, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// WaitSent waits until at least n messages were sent and returns them.
func (s *Server) WaitSent(t testing.TB, n int) []Sent {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d sent messages", n), func() bool { return len(s.Sent()) >= n })
	return s.Sent()
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
