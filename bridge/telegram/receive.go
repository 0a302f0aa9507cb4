package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge"
	"loadout/chat"
)

// update is the part of a Telegram update the channel reads. Forum topic
// fields are newer than the client library, so they are decoded here.
type update struct {
	UpdateID int64          `json:"update_id"`
	Message  *message       `json:"message"`
	Callback *callbackQuery `json:"callback_query"`
}

// callbackQuery is a press of an inline keyboard button.
type callbackQuery struct {
	ID      string         `json:"id"`
	From    *tgbotapi.User `json:"from"`
	Message *message       `json:"message"`
	Data    string         `json:"data"`
}

type message struct {
	tgbotapi.Message
	MessageThreadID int  `json:"message_thread_id"`
	IsTopicMessage  bool `json:"is_topic_message"`
}

// routeInfo is where a reply goes; the pipeline stores it, as JSON, with
// the event.
type routeInfo struct {
	ChatID   int64 `json:"chat"`
	ThreadID int   `json:"thread,omitempty"`
	ReplyTo  int   `json:"reply_to,omitempty"`
}

// ReadRoute reads a route the inbox keeps; the pipeline hands the
// routeInfo to the channel's other methods.
func (a *Adapter) ReadRoute(raw []byte) (any, error) {
	var r routeInfo
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("telegram: unreadable route: %w", err)
	}
	return r, nil
}

// asRoute is route as the pipeline hands it back.
func asRoute(route any) (routeInfo, error) {
	r, ok := route.(routeInfo)
	if !ok {
		return routeInfo{}, fmt.Errorf("telegram: %T is not a Telegram route", route)
	}
	return r, nil
}

func (r routeInfo) encode() []byte {
	b, _ := json.Marshal(r) // three integers always encode
	return b
}

// accept hands each update of a batch to the pipeline, which stores the
// ones for the bot. It returns the offset that confirms the whole batch,
// or an error (and no offset) if one could not be stored.
func (a *Adapter) accept(ctx context.Context, ups []update) (int64, error) {
	a.mu.Lock()
	self := a.bot.Self
	a.mu.Unlock()
	var next int64
	for _, u := range ups {
		accepted, err := a.pipe.Receive(ctx, updateRef(u.UpdateID), func() bridge.Pending { return a.fallback(u) }, func() (bridge.Pending, bool) {
			return a.judge(ctx, self, u)
		})
		if err != nil {
			return 0, err
		}
		if accepted && u.Callback != nil {
			// Once stored, and once only: a press delivered again is not.
			a.chosen(ctx, u.Callback)
		}
		next = max(next, u.UpdateID+1)
	}
	return next, nil
}

// fallback is where the person is told if reading an update fails: the
// chat it came from, when an allowed person sent it.
func (a *Adapter) fallback(u update) bridge.Pending {
	m := u.Message
	if m == nil || m.Chat == nil || m.From == nil || !a.allow.Allowed(strconv.FormatInt(m.From.ID, 10), m.From.UserName) {
		return bridge.Pending{}
	}
	r := routeInfo{ChatID: m.Chat.ID}
	return bridge.Pending{Inbound: chat.Inbound{ChatKey: "telegram:" + strconv.FormatInt(m.Chat.ID, 10)}, Route: r.encode()}
}

// chatOf is where a message was written: its route (the topic, in a
// forum) and the chat key its conversation is kept under.
func chatOf(m *message) (routeInfo, string) {
	r := routeInfo{ChatID: m.Chat.ID}
	chatKey := "telegram:" + strconv.FormatInt(m.Chat.ID, 10)
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		r.ThreadID = m.MessageThreadID
		chatKey += ":" + strconv.Itoa(m.MessageThreadID)
	}
	return r, chatKey
}

// judge decides whether an update is a message for the bot from an
// allowed person. A stranger addressing the bot gets one refusal; their
// text is never stored.
func (a *Adapter) judge(ctx context.Context, self tgbotapi.User, u update) (bridge.Pending, bool) {
	if u.Callback != nil {
		return a.judgeClick(ctx, u.Callback)
	}
	m := u.Message
	if m == nil || m.From == nil || m.Chat == nil || m.From.IsBot {
		return bridge.Pending{}, false
	}
	heard := spokenOf(m)
	hasFile := m.Document != nil || len(m.Photo) > 0 || heard != nil
	if hasFile {
		// A file's words are its caption; in a group, so is the mention.
		c := *m
		c.Text, c.Entities = m.Caption, m.CaptionEntities
		m = &c
	}
	if !hasFile && strings.TrimSpace(m.Text) == "" {
		return bridge.Pending{}, false
	}
	text := m.Text
	r, chatKey := chatOf(m)
	switch m.Chat.Type {
	case "private":
	case "group", "supergroup":
		var ok bool
		if text, ok = addressed(self, m); !ok {
			return bridge.Pending{}, false
		}
		r.ReplyTo = m.MessageID
	default:
		return bridge.Pending{}, false
	}
	id := strconv.FormatInt(m.From.ID, 10)
	allowed, err := a.allow.Let(ctx, id, m.From.UserName)
	if err != nil {
		a.log.Warn("telegram: cannot keep the @username a person was let in by; their web pages may refuse them until they write again", "user_id", id, "err", err)
	}
	if !allowed {
		username := "(none)"
		if m.From.UserName != "" {
			username = "@" + m.From.UserName
		}
		a.log.Warn("telegram: refused a message from a user who is not allowed; to allow them, add their id or @username to telegram.allowed_users",
			"user_id", id, "username", username, "name", strings.TrimSpace(m.From.FirstName+" "+m.From.LastName),
			"chat_id", m.Chat.ID)
		if !a.allow.FirstRefusal(id) {
			return bridge.Pending{}, false
		}
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: chatKey}, Route: r.encode(), Reply: bridge.TextRefused}, true
	}
	var images []string
	var voice *bridge.VoiceNote
	if hasFile {
		// A redelivered update is dropped by the inbox; its file is not
		// downloaded a second time first.
		if seen, err := a.pipe.Seen(ctx, updateRef(u.UpdateID)); err == nil && seen {
			return bridge.Pending{}, false
		}
	}
	switch {
	case heard != nil:
		note, reply, ok := a.takeVoice(ctx, chatKey, heard)
		if !ok || reply != "" {
			return bridge.Pending{Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "telegram:" + id}, Route: r.encode(), Reply: reply}, ok
		}
		voice = note
	case hasFile:
		note, image := a.keepFile(ctx, chatKey, m)
		text = strings.TrimSpace(note + "\n" + text)
		if image != "" {
			images = []string{image}
		}
	}
	return bridge.Pending{
		Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "telegram:" + id, Text: text, Images: images},
		Route:   r.encode(),
		Voice:   voice,
	}, true
}

// addressed reports whether a group message is for the bot: it mentions
// the bot, replies to it, or is a command (not one addressed to another
// bot). It returns the text with the mention removed. Entity offsets and
// lengths come from the sender and are checked against the text (in
// UTF-16 units, as Telegram counts) before any is used.
func addressed(self tgbotapi.User, m *message) (string, bool) {
	text := m.Text
	if name, _, ok := bridge.ParseCommand(text); ok && name != "" {
		head, _, _ := strings.Cut(strings.TrimSpace(text), " ")
		if _, to, has := strings.Cut(head, "@"); has && !strings.EqualFold(to, self.UserName) {
			return "", false
		}
		return text, true
	}
	mentioned := false
	units := utf16.Encode([]rune(text))
	var keep []uint16
	last := 0
	for _, e := range m.Entities {
		if e.Offset < last || e.Length <= 0 || e.Length > len(units)-e.Offset {
			continue // overlapping, empty, negative or past the end
		}
		seg := string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
		if (e.Type == "mention" && strings.EqualFold(seg, "@"+self.UserName)) ||
			(e.Type == "text_mention" && e.User != nil && e.User.ID == self.ID) {
			mentioned = true
			if e.Type == "mention" {
				keep = append(keep, units[last:e.Offset]...)
				last = e.Offset + e.Length
			}
		}
	}
	if !mentioned && strings.Contains(strings.ToLower(text), "@"+strings.ToLower(self.UserName)) && len(m.Entities) == 0 {
		mentioned = true
	}
	replied := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == self.ID &&
		!(m.IsTopicMessage && m.ReplyToMessage.MessageID == m.MessageThreadID)
	if !mentioned && !replied {
		return "", false
	}
	if last > 0 {
		keep = append(keep, units[last:]...)
		if stripped := strings.Join(strings.Fields(string(utf16.Decode(keep))), " "); stripped != "" {
			text = stripped
		}
	}
	return text, true
}

// updateRef names an update for the inbox.
func updateRef(id int64) string { return "update:" + strconv.FormatInt(id, 10) }
