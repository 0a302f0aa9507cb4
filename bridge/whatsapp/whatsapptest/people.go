package whatsapptest

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// The people's side: their messages, files and button presses, as
// webhook notifications posted to the channel.

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
