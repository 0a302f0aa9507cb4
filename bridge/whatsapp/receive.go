package whatsapp

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"loadout/bridge"
	"loadout/chat"
)

// Sentences people see about what the channel cannot take.
const (
	// TextUnsupported answers a kind of message the channel does not read.
	TextUnsupported = "Sorry, I can't read this kind of WhatsApp message. Please send text, a voice note, a picture or a document."
	// TextMediaFailed answers a file that could not be downloaded from
	// WhatsApp after several tries; %s is its name.
	TextMediaFailed = "Sorry, I couldn't download your file %s from WhatsApp, even after several tries. Please send it again in a moment."
	// TextPressUnchecked answers a button press that could not be
	// checked.
	TextPressUnchecked = "Sorry, I could not check that request just now. Please press again in a moment."
)

// messageRef names a message for the inbox.
func messageRef(id string) string { return "message:" + id }

// message takes one message of a notification: a stranger's is refused
// (once), an allowed person's reopens their chat's window and is
// stored. An error means it was not stored.
func (a *Adapter) message(ctx context.Context, m message, name string) error {
	from := Digits(m.From)
	if m.ID == "" || from == "" {
		a.log.Warn("whatsapp: a message without its id or sender; ignored", "type", m.Type)
		return nil
	}
	switch m.Type {
	case "reaction", "system", "request_welcome", "ephemeral":
		return nil // nothing a person asked
	}
	key := chatKey(from)
	r := route{To: from, Msg: m.ID, At: a.stamp(m.Timestamp)}
	if !a.allow[from] {
		a.log.Warn("whatsapp: refused a message from a number that is not allowed; to allow it, add it to whatsapp.allowed_numbers",
			"from", "+"+from, "profile_name", name)
		if !a.refusals.FirstRefusal(from) {
			return nil
		}
		_, err := a.pipe.Receive(ctx, messageRef(m.ID), nil, func() (bridge.Pending, bool) {
			return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode(), Reply: bridge.TextRefused}, true
		})
		return err
	}
	if err := a.opened(ctx, r); err != nil {
		return err
	}
	if m.media() != nil {
		// A redelivered message is dropped by the inbox; its file is not
		// downloaded a second time first.
		if seen, err := a.pipe.Seen(ctx, messageRef(m.ID)); err == nil && seen {
			return nil
		}
	}
	fallback := func() bridge.Pending { return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode()} }
	_, err := a.pipe.Receive(ctx, messageRef(m.ID), fallback, func() (bridge.Pending, bool) { return a.judge(ctx, m, key, r) })
	return err
}

// stamp reads a message's time (Unix seconds), never later than now.
func (a *Adapter) stamp(ts string) int64 {
	now := a.cfg.now().Unix()
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || n <= 0 || n > now {
		return now
	}
	return n
}

// media is the file a message carries, if any.
func (m message) media() *mediaRef {
	for _, f := range []*mediaRef{m.Image, m.Document, m.Audio, m.Video, m.Sticker} {
		if f != nil && f.ID != "" {
			return f
		}
	}
	return nil
}

// judge turns an allowed person's message into what the pipeline takes.
func (a *Adapter) judge(ctx context.Context, m message, key string, r route) (bridge.Pending, bool) {
	p := bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: key}, Route: r.encode()}
	var text string
	switch m.Type {
	case "text":
		if m.Text != nil {
			text = m.Text.Body
		}
	case "interactive":
		return a.press(ctx, m, key, r)
	case "button": // a template's quick reply
		if m.Button != nil {
			text = m.Button.Text
		}
	case "audio":
		if m.Audio == nil || m.Audio.ID == "" {
			return bridge.Pending{}, false
		}
		note, reply, ok := a.takeVoice(ctx, key, m.ID, m.Audio)
		if !ok {
			return bridge.Pending{}, false
		}
		if reply != "" {
			p.Reply = reply
			return p, true
		}
		p.Voice = note
		p.Inbound.Text = a.replyNote(ctx, r.To, m)
		return p, true
	case "image", "document", "video", "sticker":
		f := m.media()
		if f == nil {
			return bridge.Pending{}, false
		}
		note, image, reply := a.keepMedia(ctx, key, m.Type, f)
		if reply != "" {
			p.Reply = reply
			return p, true
		}
		if image != "" {
			p.Inbound.Images = []string{image}
		}
		text = strings.TrimSpace(note + "\n" + f.Caption)
	case "location":
		if l := m.Location; l != nil {
			text = fmt.Sprintf("[The person shared a location: %.6f, %.6f", l.Latitude, l.Longitude)
			for _, s := range []string{l.Name, l.Address} {
				if s != "" {
					text += ", " + s
				}
			}
			text += "]"
		}
	case "contacts":
		var cards []string
		for _, c := range m.Contacts {
			card := c.Name.FormattedName
			for _, ph := range c.Phones {
				card += " " + ph.Phone
			}
			cards = append(cards, strings.TrimSpace(card))
		}
		text = "[The person shared contact cards: " + strings.Join(cards, "; ") + "]"
	default:
		a.log.Info("whatsapp: a kind of message the channel does not read; the person is told", "type", m.Type)
		p.Reply = TextUnsupported
		return p, true
	}
	if c := a.replyNote(ctx, r.To, m); c != "" {
		text = c + "\n" + text
	}
	if strings.TrimSpace(text) == "" {
		return bridge.Pending{}, false
	}
	p.Inbound.Text = strings.TrimSpace(text)
	return p, true
}

// replyNote says what a reply replies to: the text of the bot's message,
// when it is one of the last the chat's record keeps.
func (a *Adapter) replyNote(ctx context.Context, to string, m message) string {
	if m.Context == nil || m.Context.ID == "" {
		return ""
	}
	for _, p := range a.sent(ctx, to) {
		if p.ID == m.Context.ID && p.Text != "" {
			quote := []rune(p.Text)
			if len(quote) > 300 {
				quote = append(quote[:300], '…')
			}
			return "[Replying to your earlier message: “" + string(quote) + "”]"
		}
	}
	return "[Replying to an earlier message]"
}
