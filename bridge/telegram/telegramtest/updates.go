package telegramtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf16"
)

// Updates: what people write to the bot, queued for getUpdates, which
// long-polls and takes an offset as confirmation, as Telegram does.

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

// updateJSON is m as the JSON of update id; s.mu must be held.
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
		s.attach(msg, id, m)
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

// getUpdates answers with the queued updates, confirming those below
// the offset asked for, and long-polls up to the timeout asked for when
// there are none.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request) {
	if s.hooked() {
		// What the Bot API answers while a webhook is set.
		writeErr(w, 409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first", 0)
		return
	}
	offset, _ := strconv.Atoi(r.PostForm.Get("offset"))
	timeout, _ := strconv.Atoi(r.PostForm.Get("timeout"))
	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		changed := s.changed() // taken before looking: an update after it wakes us
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
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			writeOK(w, []json.RawMessage{})
			return
		case <-r.Context().Done():
			return
		case <-s.closing.Done():
			return
		}
	}
}
