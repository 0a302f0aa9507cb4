package discord

import (
	"context"
	"strings"

	"github.com/bwmarrin/discordgo"

	"loadout/bridge"
	"loadout/chat"
)

// optionText is the one option of every slash command: what follows the
// command's name (/connect google, /approve #a1b2).
const optionText = "text"

// commands are the router's commands as Discord application commands:
// every one /help lists but /start, which Discord has no use for.
func (a *Adapter) commands() []*discordgo.ApplicationCommand {
	var out []*discordgo.ApplicationCommand
	for _, c := range a.router.Commands() {
		if c.Hidden || c.Name == "start" {
			continue
		}
		hint := c.Args
		switch {
		case c.Name == "approve" || c.Name == "deny":
			hint = "the request's code, when more than one waits"
		case hint == "":
			hint = "what follows the command"
		}
		out = append(out, &discordgo.ApplicationCommand{
			Name: c.Name, Description: cut(c.Help, 100),
			Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: optionText, Description: cut(hint, 100)}},
		})
	}
	return out
}

// cut shortens s to n characters, as Discord's fields allow.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// register puts the slash commands in place: in each of Guilds at once,
// or globally. It replaces what was registered before.
func (a *Adapter) register(ctx context.Context) error {
	a.mu.Lock()
	app := a.appID
	a.mu.Unlock()
	cmds := a.commands()
	scopes := a.cfg.Guilds
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	for _, g := range scopes {
		if _, err := a.api.ApplicationCommandBulkOverwrite(app, g, cmds, discordgo.WithContext(ctx)); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("discord: cannot register the slash commands; trying again on the next session", "guild_id", g, "err", err)
			}
			return err
		}
	}
	a.log.Info("discord slash commands registered", "commands", len(cmds), "guilds", len(a.cfg.Guilds))
	return nil
}

// onInteraction takes a slash command or a button press. Discord wants
// an answer within three seconds and never delivers one again, so each
// is handled at once, beside the gateway's other events.
func (a *Adapter) onInteraction(_ *discordgo.Session, i *discordgo.InteractionCreate) {
	if i.Interaction == nil {
		return
	}
	a.mu.Lock()
	if a.closing {
		a.mu.Unlock()
		return
	}
	a.events.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.events.Done()
		ctx := a.context()
		switch i.Type {
		case discordgo.InteractionApplicationCommand:
			a.command(ctx, i.Interaction)
		case discordgo.InteractionMessageComponent:
			a.press(ctx, i.Interaction)
		}
	}()
}

// presser is who made an interaction: a member in a server, a user in
// a direct message.
func presser(i *discordgo.Interaction) (*discordgo.User, *discordgo.Member) {
	if i.Member != nil && i.Member.User != nil {
		return i.Member.User, i.Member
	}
	return i.User, nil
}

// interactionRef names an interaction for the inbox.
func interactionRef(id string) string { return "interaction:" + id }

// command answers a slash command through the pipeline. Its answer is
// seen only by the person who typed it in a server (a link to connect an
// account is theirs alone). Discord is told at once that an answer is
// coming; the pipeline's parts follow up.
func (a *Adapter) command(ctx context.Context, i *discordgo.Interaction) {
	user, member := presser(i)
	if user == nil {
		return
	}
	r := route{Channel: i.ChannelID, Guild: i.GuildID, App: i.AppID, Token: i.Token, Ephemeral: i.GuildID != ""}
	if i.GuildID != "" && !a.guilds[i.GuildID] || !a.allowed(ctx, i.GuildID, user, member) {
		a.log.Warn("discord: refused a slash command from a user who is not allowed; to allow them, add their id to discord.allowed_users (or the server to discord.allowed_guilds)",
			"user_id", user.ID, "username", user.Username, "guild_id", i.GuildID)
		a.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: bridge.TextRefused, Flags: discordgo.MessageFlagsEphemeral}})
		return
	}
	data := i.ApplicationCommandData()
	text := "/" + data.Name
	for _, o := range data.Options {
		if o.Name == optionText && o.Type == discordgo.ApplicationCommandOptionString {
			text += " " + strings.TrimSpace(o.StringValue())
		}
	}
	var flags discordgo.MessageFlags
	if r.Ephemeral {
		flags = discordgo.MessageFlagsEphemeral
	}
	if !a.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: flags}}) {
		return // expired: the person sees that it failed
	}
	_, err := a.pipe.Receive(ctx, interactionRef(i.ID), nil, func() (bridge.Pending, bool) {
		return bridge.Pending{
			Inbound: chat.Inbound{ChatKey: chatKey(i.GuildID, i.ChannelID), UserKey: "discord:" + user.ID, Text: strings.TrimSpace(text)},
			Route:   r.encode(),
		}, true
	})
	if err != nil {
		a.log.Error("discord: a slash command could not be stored", "interaction", i.ID, "err", err)
		if _, err := a.post(ctx, r, bridge.TextNotSaved, nil, ""); err != nil && ctx.Err() == nil {
			a.log.Warn("discord: could not tell the person", "err", err)
		}
	}
}

// respond answers an interaction; false when Discord refused it.
func (a *Adapter) respond(ctx context.Context, i *discordgo.Interaction, resp *discordgo.InteractionResponse) bool {
	if resp.Data != nil {
		resp.Data.AllowedMentions = &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
	}
	if err := a.api.InteractionRespond(i, resp, discordgo.WithContext(ctx)); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("discord: could not answer an interaction", "interaction", i.ID, "err", scrub(err))
		}
		return false
	}
	return true
}
