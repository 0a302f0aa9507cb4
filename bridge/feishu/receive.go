package feishu

import (
	"context"
	"encoding/json"
	"strings"

	"loadout/bridge"
	"loadout/chat"
)

// TextUnsupported answers a kind of message the channel does not read.
const TextUnsupported = "Sorry, I can't read this kind of Feishu message. Please send text, a file or a picture."

// eventRef names an event for the inbox: Feishu's event id, the same
// when it delivers the event again.
func eventRef(id string) string { return "event:" + id }

// message takes one message sent to the bot: in a private chat, or in a
// group when it mentions the bot; anything else is dropped. A
// stranger's is refused (once) before anything of it is stored; an
// allowed person's is stored. An error means it was not stored.
func (a *Adapter) message(ctx context.Context, event string, e messageEvent) error {
	m, from := e.Message, e.Sender.SenderID.OpenID
	if e.Sender.SenderType != "user" || from == "" || m.MessageID == "" || !plainID(from) {
		return nil // the bot's own, another app's, or unreadable
	}
	var key string
	var r route
	switch m.ChatType {
	case "p2p":
		key, r = "feishu:"+from, route{To: from, Type: "open_id"}
	case "group":
		if !a.mentioned(e) || !plainID(m.ChatID) {
			return nil
		}
		key, r = "feishu:"+m.ChatID, route{To: m.ChatID, Type: "chat_id"}
	default:
		return nil
	}
	ref := eventRef(event)
	if !a.allow.Allowed(from, "") {
		a.log.Warn("feishu: refused a message from someone not allowed; to allow them, add their open id to feishu.allowed_users",
			"open_id", from, "user_id", e.Sender.SenderID.UserID, "chat_type", m.ChatType)
		if !a.allow.FirstRefusal(from) {
			return nil
		}
		_, err := a.pipe.Receive(ctx, ref, nil, func() (bridge.Pending, bool) {
			return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode(), Reply: bridge.TextRefused}, true
		})
		return err
	}
	if m.MessageType == "file" || m.MessageType == "image" {
		return a.fileAlone(ctx, event, e, key, r)
	}
	fallback := func() bridge.Pending { return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode()} }
	_, err := a.pipe.Receive(ctx, ref, fallback, func() (bridge.Pending, bool) {
		return a.judge(ctx, e, key, "feishu:"+from, r)
	})
	return err
}

// mentioned reports whether a group message mentions the bot.
func (a *Adapter) mentioned(e messageEvent) bool {
	self := a.self()
	for _, m := range e.Message.Mentions {
		if m.ID.OpenID == self {
			return true
		}
	}
	return false
}

// judge turns an allowed person's message into what the pipeline takes.
func (a *Adapter) judge(ctx context.Context, e messageEvent, key, user string, r route) (bridge.Pending, bool) {
	p := bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: user}, Route: r.encode()}
	m := e.Message
	var text string
	switch m.MessageType {
	case "text":
		var c struct {
			Text string `json:"text"`
		}
		json.Unmarshal([]byte(m.Content), &c)
		text = a.names(e).Replace(c.Text)
	case "post":
		text = a.postText(e)
	default:
		a.log.Info("feishu: a kind of message the channel does not read; the person is told", "message_type", m.MessageType)
		p.Reply = TextUnsupported
		return p, true
	}
	if text = strings.TrimSpace(text); text == "" {
		return bridge.Pending{}, false
	}
	kept, err := a.takeFiles(ctx, key)
	if err != nil {
		a.log.Error("feishu: could not read the files kept for a person's next message; they are told with a later one", "err", err)
	}
	for _, f := range kept.Files {
		text = f.Note + "\n" + text
		if f.Image != "" {
			p.Inbound.Images = append(p.Inbound.Images, f.Image)
		}
	}
	p.Inbound.Text = text
	return p, true
}

// names replaces a message's mention keys ("@_user_1"): the bot's with
// nothing, anyone else's with "@" and their name.
func (a *Adapter) names(e messageEvent) *strings.Replacer {
	self := a.self()
	var pairs []string
	for _, m := range e.Message.Mentions {
		if m.Key == "" {
			continue
		}
		name := ""
		if m.ID.OpenID != self {
			name = "@" + m.Name
		}
		pairs = append(pairs, m.Key, name)
	}
	return strings.NewReplacer(pairs...)
}

// postText is the text of a rich-text message: its title and
// paragraphs, links with their address, mentions by name.
func (a *Adapter) postText(e messageEvent) string {
	var post struct {
		Title   string `json:"title"`
		Content [][]struct {
			Tag      string `json:"tag"`
			Text     string `json:"text"`
			Href     string `json:"href"`
			UserID   string `json:"user_id"`
			UserName string `json:"user_name"`
		} `json:"content"`
	}
	json.Unmarshal([]byte(e.Message.Content), &post)
	names := a.names(e)
	var b strings.Builder
	if post.Title != "" {
		b.WriteString(post.Title + "\n")
	}
	for _, para := range post.Content {
		for _, el := range para {
			switch el.Tag {
			case "text", "md", "code_block":
				b.WriteString(names.Replace(el.Text))
			case "a":
				b.WriteString(el.Text)
				if el.Href != "" && el.Href != el.Text {
					b.WriteString(" (" + el.Href + ")")
				}
			case "at":
				b.WriteString(names.Replace(el.UserID))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
