package matrix

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"loadout/bridge"
	"loadout/chat"
)

// Sentences people see about encrypted messages.
const (
	// TextUndecryptable answers an encrypted message whose keys never
	// arrived.
	TextUndecryptable = "Sorry, I could not read your encrypted message: its keys never reached my device. Please send it again (your app may need to trust my device first)."
	// TextNoEncryption answers an encrypted message in a build without
	// encryption.
	TextNoEncryption = "Sorry, I can't read encrypted messages here. Please talk to me in a room without encryption."
)

// take hands one timeline event of a joined room to the pipeline: a
// message, a reaction answering a question, or an encrypted event of
// either. An error means the event was not stored.
func (a *Adapter) take(ctx context.Context, evt *event.Event) error {
	if evt.Sender == a.self() || evt.StateKey != nil {
		return nil
	}
	if evt.Content.Parsed == nil {
		evt.Content.ParseRaw(evt.Type)
	}
	if evt.Type == event.EventEncrypted {
		if a.e2e == nil {
			return a.tell(ctx, evt, "noe2ee:"+string(evt.RoomID), TextNoEncryption)
		}
		dec, err := a.e2e.Decrypt(ctx, evt)
		if errors.Is(err, errNoKeys) {
			// Kept, with the sync, until its keys arrive.
			a.log.Info("matrix: an encrypted message waits for its keys", "room", evt.RoomID, "event", evt.ID)
			a.e2e.RequestKeys(ctx, evt)
			return a.kept.add(ctx, a.store, evt)
		}
		if err != nil {
			a.log.Warn("matrix: an encrypted message could not be decrypted", "room", evt.RoomID, "event", evt.ID, "err", err)
			return a.tell(ctx, evt, "undecryptable:"+string(evt.ID), TextUndecryptable)
		}
		evt = dec
	}
	return a.takePlain(ctx, evt)
}

// takePlain takes a message or a reaction, decrypted or never
// encrypted.
func (a *Adapter) takePlain(ctx context.Context, evt *event.Event) error {
	switch evt.Type {
	case event.EventMessage:
		return a.message(ctx, evt)
	case event.EventReaction:
		return a.reaction(ctx, evt)
	}
	return nil
}

// tell answers evt's sender, once for ref, with text, where evt was
// said. Only an allowed person is told.
func (a *Adapter) tell(ctx context.Context, evt *event.Event, ref, text string) error {
	if !a.allowed(evt.Sender) {
		return nil
	}
	r := route{Room: evt.RoomID}
	if !a.direct(ctx, evt.RoomID) {
		r.Thread = evt.ID
	}
	_, err := a.pipe.Accept(ctx, bridge.Pending{ID: ref, Inbound: chat.Inbound{ChatKey: chatKey(r.Room, r.Thread)}, Route: r.encode(), Reply: text})
	return err
}

// message hands a person's message to the pipeline: every message of a
// direct chat, and in other rooms those that mention the bot. A mention
// outside a thread starts one, which is the conversation's chat; a
// message in a thread belongs to the thread's chat.
func (a *Adapter) message(ctx context.Context, evt *event.Event) error {
	c := evt.Content.AsMessage()
	if c == nil || c.MsgType == event.MsgNotice || c.RelatesTo.GetReplaceID() != "" {
		return nil // bots' notices, edits
	}
	c.RemoveReplyFallback() // the quote older clients put before a reply
	thread := c.RelatesTo.GetThreadParent()
	text := c.Body
	if c.MsgType.IsMedia() {
		text = c.GetCaption()
	}
	if !a.direct(ctx, evt.RoomID) {
		var ok bool
		if text, ok = a.mentioned(c, text); !ok {
			return nil
		}
		if thread == "" {
			thread = evt.ID
		}
	}
	key := chatKey(evt.RoomID, thread)
	r := route{Room: evt.RoomID, Thread: thread, Event: evt.ID}
	ref := "event:" + string(evt.ID)
	if c.MsgType.IsMedia() {
		// A redelivered event is dropped by the inbox; its file is not
		// downloaded a second time first.
		if seen, err := a.pipe.Seen(ctx, ref); err == nil && seen {
			return nil
		}
	}
	_, err := a.pipe.Receive(ctx, ref, func() bridge.Pending {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode()}
	}, func() (bridge.Pending, bool) {
		return a.toPending(ctx, evt, c, key, r, text)
	})
	return err
}

// toPending reads a message into what the pipeline keeps: its text, the
// file it shares, or its voice note; a stranger gets one refusal.
func (a *Adapter) toPending(ctx context.Context, evt *event.Event, c *event.MessageEventContent, key string, r route, text string) (bridge.Pending, bool) {
	user := "matrix:" + string(evt.Sender)
	if !a.allowed(evt.Sender) {
		a.log.Warn("matrix user refused: add their id to matrix.allowed_users to allow them", "user_id", evt.Sender, "room", evt.RoomID)
		if !a.allow.FirstRefusal(string(evt.Sender)) {
			return bridge.Pending{}, false
		}
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode(), Reply: bridge.TextRefused}, true
	}
	var images []string
	var voice *bridge.VoiceNote
	switch {
	case c.MsgType == event.MsgAudio:
		note, reply, ok := a.takeVoice(ctx, key, c)
		if !ok || reply != "" {
			return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: user}, Route: r.encode(), Reply: reply}, ok
		}
		voice = note
	case c.MsgType.IsMedia():
		note, image := a.keepFile(ctx, key, c)
		text = strings.TrimSpace(note + "\n" + text)
		if image != "" {
			images = append(images, image)
		}
	}
	text = strings.TrimSpace(text)
	if text == "" && voice == nil {
		return bridge.Pending{}, false
	}
	return bridge.Pending{
		Inbound: chat.Inbound{ChatKey: key, UserKey: user, Text: text, Images: images},
		Route:   r.encode(),
		Voice:   voice,
	}, true
}

// mentioned reports whether a message mentions the bot (by m.mentions,
// a link to its id, or its id in the text), and returns the text without
// the mention.
func (a *Adapter) mentioned(c *event.MessageEventContent, text string) (string, bool) {
	self := a.self()
	ok := c.Mentions != nil && c.Mentions.Has(self)
	ok = ok || strings.Contains(c.FormattedBody, "matrix.to/#/"+string(self)) || strings.Contains(text, string(self))
	if !ok {
		return text, false
	}
	return stripMention(text, self), true
}

// stripMention removes the bot's id, or the pill text a client wrote for
// it ("loadout: …"), from the start of a message.
func stripMention(text string, self id.UserID) string {
	text = strings.ReplaceAll(text, string(self), "")
	local := regexp.QuoteMeta(self.Localpart())
	text = regexp.MustCompile(`^\s*(?i:`+local+`)[:,]?\s`).ReplaceAllString(text, "")
	return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(text), ":,"))
}

// reaction turns a reaction on a question into the asker's /approve or
// /deny. A reaction by anyone else, or on anything else, does nothing.
func (a *Adapter) reaction(ctx context.Context, evt *event.Event) error {
	c := evt.Content.AsReaction()
	if c == nil {
		return nil
	}
	target := c.RelatesTo.GetAnnotationID()
	var verb string
	switch strings.TrimSuffix(c.RelatesTo.GetAnnotationKey(), "\ufe0f") {
	case reactApprove:
		verb = "/approve "
	case reactDeny:
		verb = "/deny "
	default:
		return nil
	}
	q, err := a.question(ctx, target)
	if err != nil {
		return err
	}
	if q.ID == "" {
		return nil
	}
	if evt.Sender != q.User {
		a.log.Info("matrix: ignored a reaction to a question by someone other than the person asked", "user_id", evt.Sender, "room", evt.RoomID)
		return nil
	}
	user := "matrix:" + string(evt.Sender)
	key := chatKey(evt.RoomID, q.Thread)
	if can, err := a.router.Answerable(ctx, key, user, q.ID); err != nil || !can.OK {
		if err != nil {
			return err
		}
		a.log.Info("matrix: a reaction to a question that cannot be answered now", "room", evt.RoomID, "why", can.Why)
		return nil
	}
	r := route{Room: evt.RoomID, Thread: q.Thread}
	fresh, err := a.pipe.Accept(ctx, bridge.Pending{
		ID:      "event:" + string(evt.ID),
		Inbound: chat.Inbound{ChatKey: key, UserKey: user, Text: verb + q.ID},
		Route:   r.encode(),
	})
	if fresh && q.Text != "" {
		a.chosen(ctx, evt.RoomID, target, q, verb == "/approve ")
	}
	return err
}
