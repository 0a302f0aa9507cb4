package telegramtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Presses of the bot's buttons: callback_query updates.

// Click queues a callback_query update: the person from pressing the
// button with data under the bot's message msg in chat (thread, for a
// forum topic), and returns the update id.
func (s *Server) Click(from User, chat int64, thread, msg int, data string) int {
	return s.PushRaw(s.click(from, chat, thread, msg, data))
}

// ClickUpdate returns the callback_query update Click would queue, with
// a new update id, without queueing it: what Telegram posts to a
// webhook when the person presses the button.
func (s *Server) ClickUpdate(from User, chat int64, thread, msg int, data string) (int, []byte) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s.click(from, chat, thread, msg, data)), &m); err != nil {
		panic(fmt.Sprintf("telegramtest: ClickUpdate: %v", err))
	}
	s.mu.Lock()
	id := s.nextID
	s.nextID++
	s.mu.Unlock()
	m["update_id"] = id
	b, _ := json.Marshal(m)
	return id, b
}

// click is the JSON of a callback_query update, without its id.
func (s *Server) click(from User, chat int64, thread, msg int, data string) string {
	m := map[string]any{"message_id": msg, "date": time.Now().Unix(),
		"chat": map[string]any{"id": chat, "type": "private"}, "text": "question",
		"from": map[string]any{"id": BotID, "is_bot": true, "first_name": "loadout", "username": BotUserName}}
	if thread != 0 {
		m["message_thread_id"], m["is_topic_message"] = thread, true
		m["chat"] = map[string]any{"id": chat, "type": "supergroup", "is_forum": true}
	} else if chat != from.ID {
		m["chat"] = map[string]any{"id": chat, "type": "group"}
	}
	s.mu.Lock()
	s.nextCallback++
	cb := fmt.Sprintf("cb%d", s.nextCallback)
	for _, sent := range s.sent {
		if sent.MessageID == msg {
			// Telegram gives the text as the person sees it.
			m["text"] = sent.Text
			if v, err := CheckHTML(sent.Text); err == nil && strings.EqualFold(sent.ParseMode, "HTML") {
				m["text"] = v
			}
		}
	}
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"callback_query": map[string]any{
		"id": cb, "data": data, "chat_instance": "ci", "message": m,
		"from": map[string]any{"id": from.ID, "is_bot": false, "first_name": cmp.Or(from.FirstName, "Ana"), "username": from.UserName},
	}})
	return string(b)
}
