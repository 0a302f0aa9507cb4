package discordtest

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"time"
)

// Channels and their messages: what people post (kept for the API to
// list, dispatched to the gateway), and what the bot posts and edits.

type channel struct {
	id, guild string
	messages  []*stored
}

// stored is a message in a channel: a person's or the bot's.
type stored struct {
	raw  map[string]any // the message as the API shows it
	sent *Sent          // the bot's, else nil
}

// DM is the direct message channel between the bot and user.
func (s *Server) DM(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dm(user)
}

func (s *Server) dm(user string) string {
	if ch, ok := s.dms[user]; ok {
		return ch
	}
	ch := "9" + user
	s.dms[user] = ch
	s.channels[ch] = &channel{id: ch}
	return ch
}

// Channel adds a channel (or thread) of a server.
func (s *Server) Channel(guild, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[id] = &channel{id: id, guild: guild}
}

// Roles makes user a member of guild with roles.
func (s *Server) Roles(guild, user string, roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[guild+"/"+user] = append([]string{}, roles...)
}

// Post is a person's message: it is kept in its channel (for the API to
// list) and dispatched to the gateway session, or kept for its resume
// while no connection is open. It returns the message's id.
func (s *Server) Post(m Message) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[m.Channel]
	if ch == nil {
		ch = &channel{id: m.Channel, guild: m.Guild}
		s.channels[m.Channel] = ch
	}
	id := s.id()
	content := m.Content
	var mentions []any
	if m.Mention {
		content = "<@" + BotID + "> " + content
		mentions = append(mentions, bot())
	}
	var atts []any
	for _, a := range m.Attachments {
		aid := s.id()
		s.cdn[aid] = a.Content
		size := a.Size
		if size == 0 {
			size = len(a.Content)
		}
		att := map[string]any{"id": aid, "filename": a.Name, "content_type": a.ContentType, "size": size,
			"url": s.URL + "/cdn/attachments/" + m.Channel + "/" + aid + "/" + a.Name}
		if a.Seconds > 0 {
			att["duration_secs"] = a.Seconds
			att["waveform"] = "AAAA"
		}
		atts = append(atts, att)
	}
	raw := map[string]any{"id": id, "channel_id": m.Channel, "author": userJSON(m.Author), "content": content,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "type": 0, "mentions": mentions, "attachments": atts}
	if m.Voice {
		raw["flags"] = 1 << 13
	}
	if m.ReplyTo != "" {
		raw["type"] = 19
		raw["message_reference"] = map[string]any{"message_id": m.ReplyTo, "channel_id": m.Channel}
		if ref := s.find(m.ReplyTo); ref != nil {
			raw["referenced_message"] = ref.raw
		}
	}
	ch.messages = append(ch.messages, &stored{raw: raw})
	event := clone(raw)
	if m.Guild != "" {
		event["guild_id"] = m.Guild
		roles := m.Roles
		if roles == nil {
			roles = s.members[m.Guild+"/"+m.Author.ID]
		}
		event["member"] = map[string]any{"roles": append([]string{}, roles...)}
	}
	s.dispatch("MESSAGE_CREATE", event)
	return id
}

// find is the message id, in any channel; s.mu is held.
func (s *Server) find(id string) *stored {
	for _, ch := range s.channels {
		for _, m := range ch.messages {
			if m.raw["id"] == id {
				return m
			}
		}
	}
	return nil
}

// Redispatch sends the MESSAGE_CREATE of message id again, as Discord
// may after a resume.
func (s *Server) Redispatch(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(id)
	if m == nil {
		s.t.Errorf("discordtest: no message %s to dispatch again", id)
		return
	}
	event := clone(m.raw)
	if g := s.channels[m.raw["channel_id"].(string)].guild; g != "" {
		event["guild_id"] = g
	}
	s.dispatch("MESSAGE_CREATE", event)
}

// Sent are the bot's messages in channel, in order, as they stand.
func (s *Server) Sent(channel string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	if ch := s.channels[channel]; ch != nil {
		for _, m := range ch.messages {
			if m.sent != nil {
				out = append(out, *m.sent)
			}
		}
	}
	return out
}

// Count is how many messages the bot has in channel.
func (s *Server) Count(channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if ch := s.channels[channel]; ch != nil {
		for _, m := range ch.messages {
			if m.sent != nil {
				n++
			}
		}
	}
	return n
}

// list answers GET /channels/{id}/messages: with after, the oldest
// limit messages after it, newest first, as Discord lists them.
func (s *Server) list(w http.ResponseWriter, channel string, q map[string]string) {
	limit, _ := strconv.Atoi(q["limit"])
	if limit <= 0 || limit > 100 {
		limit = 50
	}
	s.mu.Lock()
	ch := s.channels[channel]
	var out []any
	if ch != nil {
		var pick []*stored
		after := q["after"]
		for _, m := range ch.messages {
			if after == "" || less(after, m.raw["id"].(string)) {
				pick = append(pick, m)
			}
		}
		if after != "" && len(pick) > limit {
			pick = pick[:limit]
		} else if len(pick) > limit {
			pick = pick[len(pick)-limit:]
		}
		for i := len(pick) - 1; i >= 0; i-- {
			out = append(out, s.shown(pick[i]))
		}
	}
	s.mu.Unlock()
	if ch == nil {
		fail(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	reply(w, out)
}

func less(x, y string) bool { return len(x) < len(y) || len(x) == len(y) && x < y }

// shown is a message as the API lists it; s.mu is held.
func (s *Server) shown(m *stored) map[string]any {
	if m.sent == nil {
		return m.raw
	}
	out := clone(m.raw)
	out["content"] = m.sent.Content
	return out
}

// payload reads a message the bot posts: JSON, or multipart with
// payload_json and files.
func payload(r *http.Request) (map[string]any, []File, error) {
	var body map[string]any
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		err := json.NewDecoder(r.Body).Decode(&body)
		return body, nil, err
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	var files []File
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		b, _ := io.ReadAll(part)
		if part.FormName() == "payload_json" {
			if err := json.Unmarshal(b, &body); err != nil {
				return nil, nil, err
			}
			continue
		}
		files = append(files, File{Name: part.FileName(), Content: b})
	}
	if atts, ok := body["attachments"].([]any); ok {
		for i, a := range atts {
			if am, ok := a.(map[string]any); ok && i < len(files) {
				files[i].Duration, _ = am["duration_secs"].(float64)
			}
		}
	}
	return body, files, nil
}

// buttonsOf reads the buttons of components.
func buttonsOf(v any) []Button {
	var out []Button
	rows, _ := v.([]any)
	for _, row := range rows {
		rm, _ := row.(map[string]any)
		cs, _ := rm["components"].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			label, _ := cm["label"].(string)
			id, _ := cm["custom_id"].(string)
			out = append(out, Button{Label: label, CustomID: id})
		}
	}
	return out
}

// create posts the bot's message in channel (a follow-up of interaction
// when not ""), held when Hold says so, once per nonce when asked.
func (s *Server) create(w http.ResponseWriter, r *http.Request, channel, interaction string) {
	body, files, err := payload(r)
	if err != nil {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return
	}
	content, _ := body["content"].(string)
	flags, _ := body["flags"].(float64)
	if len([]rune(content)) > 2000 {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
		return
	}
	if content == "" && len(files) == 0 && body["components"] == nil {
		fail(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return
	}
	if interaction == "" && !s.pass(r) {
		return // abandoned while held: never posted
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[channel]
	if ch == nil {
		fail(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	nonce, _ := body["nonce"].(string)
	if enforce, _ := body["enforce_nonce"].(bool); enforce && nonce != "" {
		for _, m := range ch.messages {
			if m.sent != nil && m.sent.Nonce == nonce {
				reply(w, s.shown(m))
				return
			}
		}
	}
	id := s.id()
	sent := &Sent{ID: id, Channel: channel, Content: content, Buttons: buttonsOf(body["components"]), Nonce: nonce,
		Flags: int(flags), Ephemeral: int(flags)&64 != 0, Interaction: interaction, Files: files, At: time.Now()}
	if ref, ok := body["message_reference"].(map[string]any); ok {
		sent.Reply, _ = ref["message_id"].(string)
	}
	raw := map[string]any{"id": id, "channel_id": channel, "author": bot(), "content": content, "type": 0,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "flags": int(flags)}
	ch.messages = append(ch.messages, &stored{raw: raw, sent: sent})
	reply(w, raw)
}

func (s *Server) edit(w http.ResponseWriter, r *http.Request, channel, id string) {
	body, _, err := payload(r)
	if err != nil {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(id)
	if m == nil || m.sent == nil || m.sent.Channel != channel {
		fail(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	if c, ok := body["content"].(string); ok {
		if len([]rune(c)) > 2000 {
			fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
			return
		}
		m.sent.Content = c
	}
	if cs, ok := body["components"]; ok {
		m.sent.Buttons = buttonsOf(cs)
	}
	m.sent.Edits++
	reply(w, s.shown(m))
}
