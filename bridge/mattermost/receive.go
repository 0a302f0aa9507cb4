package mattermost

import (
	"cmp"
	"context"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools/files"
)

// postRef names a post for the inbox: the websocket's event and the same
// post read back share it.
func postRef(id string) string { return "post:" + id }

// take hands one post to the pipeline, which stores those for the bot,
// and moves its channel's cursor past it when the post was for the bot
// (the cursor of a channel whose posts are mostly for others moves when
// it is read back). An error means the post could not be stored: the
// cursor stays, and reading back takes it again.
func (a *Adapter) take(ctx context.Context, p *post, kind string) error {
	if self, _ := a.bot(); p.UserID == self || p.DeleteAt != 0 || p.ChannelID == "" {
		return nil
	}
	var forBot bool
	_, err := a.pipe.Receive(ctx, postRef(p.ID), func() bridge.Pending { return a.fallback(p, kind) }, func() (bridge.Pending, bool) {
		pend, ok := a.judge(ctx, p, kind)
		forBot = ok
		return pend, ok
	})
	if err != nil {
		a.log.Error("mattermost: a post could not be stored; it is read back later", "post_id", p.ID, "channel_id", p.ChannelID, "err", err)
		return err
	}
	if forBot || kind == "D" {
		if err := a.advance(ctx, p); err != nil {
			a.log.Warn("mattermost: cannot store a channel's cursor; its posts are read back again", "channel_id", p.ChannelID, "err", err)
		}
	}
	return nil
}

// where is a post's conversation and reply address: a direct message
// is one chat (an answer goes to the post's thread when it is in one);
// in a channel each thread is a chat, and a post at the top level starts
// its own thread.
func where(p *post, kind string) (string, route) {
	if kind == "D" {
		return chatKey(p.ChannelID, ""), route{Channel: p.ChannelID, Root: p.RootID, Direct: true}
	}
	root := cmp.Or(p.RootID, p.ID)
	return chatKey(p.ChannelID, root), route{Channel: p.ChannelID, Root: root}
}

// fallback is where the person is told if reading a post fails.
func (a *Adapter) fallback(p *post, kind string) bridge.Pending {
	if !a.allow.Allowed(p.UserID, a.cachedName(p.UserID)) {
		return bridge.Pending{}
	}
	key, r := where(p, kind)
	return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode()}
}

// judge decides whether a post is for the bot, from an allowed person:
// every post in a direct message, and in other channels those that
// mention the bot. A stranger addressing the bot gets one refusal;
// their text is never stored.
func (a *Adapter) judge(ctx context.Context, p *post, kind string) (bridge.Pending, bool) {
	_, name := a.bot()
	if p.Type != "" || p.UserID == "" || p.Props["from_bot"] == "true" || p.Props["from_webhook"] == "true" {
		return bridge.Pending{}, false
	}
	text := p.Message
	if kind != "D" {
		var ok bool
		if text, ok = addressed(name, text); !ok {
			return bridge.Pending{}, false
		}
	}
	text = command(strings.TrimSpace(text))
	if text == "" && len(p.FileIDs) == 0 {
		return bridge.Pending{}, false
	}
	key, r := where(p, kind)
	if !a.allowed(ctx, p.UserID) {
		a.log.Warn("mattermost: refused a post from a user who is not allowed; to allow them, add their username or user id to mattermost.allowed_users",
			"user_id", p.UserID, "username", a.cachedName(p.UserID), "channel_id", p.ChannelID)
		if !a.allow.FirstRefusal(p.UserID) {
			return bridge.Pending{}, false
		}
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode(), Reply: bridge.TextRefused}, true
	}
	in := chat.Inbound{ChatKey: key, UserKey: "mattermost:" + p.UserID, Text: text}
	if len(p.FileIDs) == 0 {
		return bridge.Pending{Inbound: in, Route: r.encode()}, true
	}
	// A post read back again is dropped by the inbox; its files are not
	// downloaded a second time first.
	if seen, err := a.pipe.Seen(ctx, postRef(p.ID)); err == nil && seen {
		return bridge.Pending{}, false
	}
	infos := map[string]fileInfo{}
	for _, f := range p.Metadata.Files {
		infos[f.ID] = f
	}
	var notes []string
	for _, id := range p.FileIDs {
		f, ok := infos[id]
		if !ok {
			f = fileInfo{ID: id, Name: "file-" + id}
		}
		note, image := a.keepFile(ctx, key, f)
		notes = append(notes, note)
		if image != "" {
			in.Images = append(in.Images, image)
		}
	}
	in.Text = strings.TrimSpace(strings.Join(notes, "\n") + "\n" + in.Text)
	return bridge.Pending{Inbound: in, Route: r.encode()}, true
}

// command reads "!clear" as the command /clear: Mattermost's clients
// take a post that starts with "/" as one of the server's own slash
// commands, so people type the bot's commands with "!".
func command(text string) string {
	if len(text) > 1 && text[0] == '!' && (text[1] >= 'a' && text[1] <= 'z' || text[1] >= 'A' && text[1] <= 'Z') {
		return "/" + text[1:]
	}
	return text
}

// addressed reports whether text mentions @name (a username ends at a
// character that cannot be in one), and returns it without the
// mentions. It takes time linear in the text.
func addressed(name, text string) (string, bool) {
	if name == "" {
		return "", false
	}
	tag := "@" + strings.ToLower(name)
	lower := strings.ToLower(text)
	if len(lower) != len(text) {
		lower = text // a case change that resizes the text: compare as it is
	}
	var b strings.Builder
	found, from := false, 0
	for i := 0; i < len(lower); {
		j := strings.Index(lower[i:], tag)
		if j < 0 {
			break
		}
		start, end := i+j, i+j+len(tag)
		if (start == 0 || !nameChar(lower[start-1])) && (end == len(lower) || !nameChar(lower[end])) {
			b.WriteString(text[from:start])
			b.WriteByte(' ')
			found, from = true, end
		}
		i = end
	}
	if !found {
		return "", false
	}
	b.WriteString(text[from:])
	return strings.Join(strings.Fields(b.String()), " "), true
}

// nameChar reports whether c may be part of a username (letters,
// digits, '.', '-', '_').
func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// allowed reports whether a person may use the bot: listed in
// allowed_users by id, or by their username (kept with the id they
// wrote with, for Admits).
func (a *Adapter) allowed(ctx context.Context, id string) bool {
	if a.allow.Allowed(id, "") {
		return true
	}
	name := a.username(ctx, id)
	ok, err := a.allow.Let(ctx, id, name)
	if err != nil {
		a.log.Warn("mattermost: cannot keep the username a person was let in by; their web pages may refuse them until they write again", "user_id", id, "err", err)
	}
	return ok
}

// nameTTL is how long a username read from the server is taken as it is.
const nameTTL = 5 * time.Minute

// username is a person's username, read from the server at most every
// nameTTL; "" when it cannot be read.
func (a *Adapter) username(ctx context.Context, id string) string {
	a.mu.Lock()
	n, ok := a.names[id]
	a.mu.Unlock()
	if ok && time.Since(n.at) < nameTTL {
		return n.name
	}
	u, err := a.api.user(ctx, id)
	if err != nil {
		a.log.Warn("mattermost: cannot read a person's username", "user_id", id, "err", err)
		return n.name
	}
	a.mu.Lock()
	if len(a.names) > 10000 {
		clear(a.names)
	}
	a.names[id] = named{name: u.Username, at: time.Now()}
	a.mu.Unlock()
	return u.Username
}

// cachedName is the username last read for id, "" when none was.
func (a *Adapter) cachedName(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.names[id].name
}

// maxDownload is the largest file taken: Mattermost's default
// MaxFileSize. Larger ones are refused whatever size the post states,
// and a download stops there.
const maxDownload = 100 << 20

// keepFile downloads a file of a post into the chat's workspace and
// returns the note the model reads about it, and its name when it is a
// picture the model may look at.
func (a *Adapter) keepFile(ctx context.Context, key string, f fileInfo) (note, image string) {
	name := cmp.Or(f.Name, "file-"+f.ID)
	mimeType, _, _ := strings.Cut(cmp.Or(f.MimeType, "application/octet-stream"), ";")
	switch {
	case a.cfg.Files == nil:
		return bridge.FileNotKept(name, "files are not kept in this setup"), ""
	case f.Size > maxDownload:
		return bridge.FileNotKept(name, "I take files up to 100 MB"), ""
	}
	body, err := a.api.download(ctx, f.ID)
	if err != nil {
		a.log.Warn("mattermost: could not download a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, "it could not be downloaded from Mattermost"), ""
	}
	defer body.Close()
	saved, n, err := a.cfg.Files.Save(ctx, key, name, bridge.Capped(body, maxDownload))
	if err != nil {
		a.log.Warn("mattermost: could not keep a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, err.Error()), ""
	}
	if files.IsImage(mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, mimeType, n), image
}
