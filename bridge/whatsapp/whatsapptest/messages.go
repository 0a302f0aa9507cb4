package whatsapptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// The messages endpoint: what the bot sends (text, buttons, templates,
// files) and its read receipts, checked against Meta's limits and
// recorded.

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

// Read is a read receipt the bot sent, with "typing…" or not.
type Read struct {
	Message string
	Typing  bool
}

// Sent is what the bot sent to the person to, in order.
func (s *Server) Sent(to string) []Sent {
	return s.sent.Filter(func(m Sent) bool { return m.To == to })
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

// Reads are the read receipts sent.
func (s *Server) Reads() []Read { return s.reads.All() }

// Count is how many messages the bot sent to to.
func (s *Server) Count(to string) int { return len(s.Sent(to)) }

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
		s.reads.Add(Read{Message: m.MessageID, Typing: m.Typing != nil && m.Typing.Type == "text"})
		s.changed.Notify()
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
		f, ok := s.uploaded(id)
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
	if f, ok := s.failure(); ok {
		apiError(w, f.Status, f.Code, f.Message)
		return
	}
	if !s.pass(r.Context()) {
		return // abandoned: never sent
	}
	s.mu.Lock()
	s.next++
	out.ID = fmt.Sprintf("wamid.OUT%06d", s.next)
	out.At = s.now()
	closed := s.window && out.Type != "template" && out.At.Sub(s.seen[out.To]) >= 24*time.Hour
	if !closed {
		s.sent.Add(out) // under mu: recorded in the order of the ids
	}
	statuses := s.statuses
	s.mu.Unlock()
	s.changed.Notify()
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
