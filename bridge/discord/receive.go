package discord

import (
	"context"
	"strings"

	"github.com/bwmarrin/discordgo"

	"loadout/bridge"
	"loadout/chat"
)

// messageRef names a message for the inbox: the gateway's event and the
// same message read back share it.
func messageRef(id string) string { return "message:" + id }

// onMessage takes a message from the gateway.
func (a *Adapter) onMessage(_ *discordgo.Session, m *discordgo.MessageCreate) {
	if m.Message == nil {
		return
	}
	ctx := a.context()
	if !a.gated(ctx) {
		return
	}
	unlock := a.cursors.lock(m.ChannelID)
	defer unlock()
	if _, ok := a.takeHeld(ctx, m.Message); !ok {
		// Read back after a pause, from the last message stored.
		a.wantCatchUp()
	}
}

// takeHeld hands one message to the pipeline, which stores those for
// the bot, and moves the conversation's cursor past it; the caller holds
// the conversation. It reports whether the message was new to the inbox,
// and ok false when it could not be stored: the cursor then stays, and
// reading back takes it again.
func (a *Adapter) takeHeld(ctx context.Context, m *discordgo.Message) (fresh, ok bool) {
	if err := a.cursors.load(ctx); err != nil {
		a.log.Error("discord: cannot read the conversations' cursors", "err", err)
		a.cursors.gap(m.ChannelID)
		return false, false
	}
	var from bool
	fresh, err := a.pipe.Receive(ctx, messageRef(m.ID), func() bridge.Pending { return a.fallback(m) }, func() (bridge.Pending, bool) {
		p, ok := a.judge(ctx, m)
		from = ok && p.Inbound.UserKey != ""
		return p, ok
	})
	if err != nil {
		a.log.Error("discord: a message could not be stored; it is read back later", "message_id", m.ID, "channel_id", m.ChannelID, "err", err)
		a.cursors.gap(m.ChannelID)
		return false, false
	}
	if _, known := a.cursors.get(m.ChannelID); known || from {
		if err := a.cursors.advance(ctx, m.ChannelID, m.GuildID, m.ID); err != nil {
			a.log.Warn("discord: cannot store a conversation's cursor; its messages are read back again", "channel_id", m.ChannelID, "err", err)
		}
	}
	return fresh, true
}

// fallback is where the person is told if reading a message fails.
func (a *Adapter) fallback(m *discordgo.Message) bridge.Pending {
	if m.Author == nil || !a.allow.Allowed(m.Author.ID, m.Author.Username) {
		return bridge.Pending{}
	}
	r := route{Channel: m.ChannelID, Guild: m.GuildID}
	return bridge.Pending{Inbound: chat.Inbound{ChatKey: chatKey(m.GuildID, m.ChannelID)}, Route: r.encode()}
}

// judge decides whether a message is for the bot, from an allowed
// person: every direct message, and in servers those that mention the
// bot or reply to it. A stranger addressing the bot gets one refusal;
// their text is never stored.
func (a *Adapter) judge(ctx context.Context, m *discordgo.Message) (bridge.Pending, bool) {
	self := a.botUser()
	if m.Author == nil || m.Author.Bot || m.Author.System || m.Author.ID == self {
		return bridge.Pending{}, false
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return bridge.Pending{}, false
	}
	key := chatKey(m.GuildID, m.ChannelID)
	r := route{Channel: m.ChannelID, Guild: m.GuildID}
	text := m.Content
	if m.GuildID != "" {
		var ok bool
		if text, ok = addressed(self, m); !ok {
			return bridge.Pending{}, false
		}
		if !a.guilds[m.GuildID] {
			a.log.Warn("discord: mentioned in a server that is not allowed; to answer there, add its id to discord.allowed_guilds",
				"guild_id", m.GuildID, "user_id", m.Author.ID)
			return bridge.Pending{}, false
		}
		r.Reply = m.ID
	}
	if len(m.Attachments) == 0 && strings.TrimSpace(text) == "" {
		return bridge.Pending{}, false
	}
	user := m.Author.ID
	if !a.allowed(ctx, m.GuildID, m.Author, m.Member) {
		a.log.Warn("discord: refused a message from a user who is not allowed; to allow them, add their id to discord.allowed_users (or give them a role in discord.allowed_roles)",
			"user_id", user, "username", m.Author.Username, "guild_id", m.GuildID, "channel_id", m.ChannelID)
		if !a.allow.FirstRefusal(user) {
			return bridge.Pending{}, false
		}
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode(), Reply: bridge.TextRefused}, true
	}
	in := chat.Inbound{ChatKey: key, UserKey: "discord:" + user, Text: strings.TrimSpace(text)}
	if len(m.Attachments) == 0 {
		return bridge.Pending{Inbound: in, Route: r.encode()}, true
	}
	// A message read back again is dropped by the inbox; its files are
	// not downloaded a second time first.
	if seen, err := a.pipe.Seen(ctx, messageRef(m.ID)); err == nil && seen {
		return bridge.Pending{}, false
	}
	if v := spokenOf(m); v != nil {
		note, reply, ok := a.takeVoice(ctx, key, v)
		if !ok {
			return bridge.Pending{}, false
		}
		if reply != "" {
			return bridge.Pending{Inbound: in, Route: r.encode(), Reply: reply}, true
		}
		return bridge.Pending{Inbound: in, Route: r.encode(), Voice: note}, true
	}
	var notes []string
	for _, f := range m.Attachments {
		note, image := a.keepFile(ctx, key, f)
		notes = append(notes, note)
		if image != "" {
			in.Images = append(in.Images, image)
		}
	}
	in.Text = strings.TrimSpace(strings.Join(notes, "\n") + "\n" + in.Text)
	return bridge.Pending{Inbound: in, Route: r.encode()}, true
}

// addressed reports whether a server message is for the bot: it
// mentions the bot or replies to one of its messages. It returns the
// text without the mention.
func addressed(self string, m *discordgo.Message) (string, bool) {
	if self == "" {
		return "", false
	}
	mentioned := false
	for _, u := range m.Mentions {
		if u != nil && u.ID == self {
			mentioned = true
		}
	}
	text := m.Content
	for _, tag := range []string{"<@" + self + ">", "<@!" + self + ">"} {
		if strings.Contains(text, tag) {
			mentioned = true
			text = strings.ReplaceAll(text, tag, " ")
		}
	}
	replied := m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && m.ReferencedMessage.Author.ID == self
	if !mentioned && !replied {
		return "", false
	}
	return strings.Join(strings.Fields(text), " "), true
}

// allowed reports whether a person may use the bot: listed in
// allowed_users, or holding one of allowed_roles in the server the
// message is in (for a direct message, in any allowed server).
func (a *Adapter) allowed(ctx context.Context, guild string, u *discordgo.User, member *discordgo.Member) bool {
	if u == nil {
		return false
	}
	ok, err := a.allow.Let(ctx, u.ID, u.Username)
	if err != nil {
		a.log.Warn("discord: cannot keep the username a person was let in by; their web pages may refuse them until they write again", "user_id", u.ID, "err", err)
	}
	if ok {
		return true
	}
	if len(a.roles) == 0 {
		return false
	}
	if guild != "" {
		if !a.guilds[guild] {
			return false
		}
		if member == nil || member.Roles == nil {
			member = a.member(ctx, guild, u.ID)
		}
		return member != nil && a.hasRole(member.Roles)
	}
	for g := range a.guilds {
		if m := a.member(ctx, g, u.ID); m != nil && a.hasRole(m.Roles) {
			return true
		}
	}
	return false
}

func (a *Adapter) hasRole(roles []string) bool {
	for _, r := range roles {
		if a.roles[r] {
			return true
		}
	}
	return false
}

// member is a person's membership of a server, nil when they are not a
// member or it cannot be read.
func (a *Adapter) member(ctx context.Context, guild, user string) *discordgo.Member {
	m, err := a.lookup(ctx, guild, user)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("discord: cannot read a server member's roles", "guild_id", guild, "user_id", user, "err", err)
		}
		return nil
	}
	return m
}

// lookup is a person's membership of a server: nil when Discord says
// they are not a member, an error when it cannot be read now.
func (a *Adapter) lookup(ctx context.Context, guild, user string) (*discordgo.Member, error) {
	m, err := a.api.GuildMember(guild, user, discordgo.WithContext(ctx))
	if err != nil {
		if retryable(err) {
			return nil, err
		}
		return nil, nil
	}
	return m, nil
}

// Admits reports whether the person with this key may use the bot now,
// as a direct message of theirs would be judged: listed in
// allowed_users (by id, or by the username they last wrote with), or
// holding one of allowed_roles in an allowed server (bridge.Admitter).
func (a *Adapter) Admits(ctx context.Context, userKey string) (bool, error) {
	id, ok := strings.CutPrefix(userKey, "discord:")
	if !ok || id == "" {
		return false, nil
	}
	if ok, err := a.allow.Admits(ctx, id); ok || err != nil {
		return ok, err
	}
	if len(a.roles) == 0 {
		return false, nil
	}
	var failed error
	for g := range a.guilds {
		m, err := a.lookup(ctx, g, id)
		if err != nil {
			failed = err
			continue
		}
		if m != nil && a.hasRole(m.Roles) {
			return true, nil
		}
	}
	return false, failed
}

var _ bridge.Admitter = (*Adapter)(nil)
