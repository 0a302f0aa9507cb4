package discordtest

import (
	"encoding/json"
	"net/http"
	"slices"
)

// Interactions: slash commands and button presses, the bot's answer to
// each, and its follow-ups through the interaction's token.

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
