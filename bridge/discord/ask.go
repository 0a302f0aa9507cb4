package discord

import (
	"context"
	"strings"

	"github.com/bwmarrin/discordgo"

	"loadout/bridge"
	"loadout/chat"
)

// Custom ids of the approval buttons: "ok:<approval id>:<user id>" or
// "no:…". The user id is the only person whose press counts; the engine
// checks it again.
const (
	pressApprove = "ok"
	pressDeny    = "no"
	pressAlways  = "al"
)

// buttons are a question's Approve and Deny, and Always allow where it
// is offered, labelled with its code.
func buttons(q bridge.Question, user string) []discordgo.MessageComponent {
	uid := strings.TrimPrefix(user, "discord:")
	code := chat.CodeOf(q.ID)
	row := []discordgo.MessageComponent{
		discordgo.Button{Label: "Approve " + code, Style: discordgo.SuccessButton, CustomID: pressApprove + ":" + q.ID + ":" + uid},
		discordgo.Button{Label: "Deny " + code, Style: discordgo.DangerButton, CustomID: pressDeny + ":" + q.ID + ":" + uid},
	}
	if q.Always != "" {
		row = append(row, discordgo.Button{Label: "Always allow " + code, Style: discordgo.SecondaryButton, CustomID: pressAlways + ":" + q.ID + ":" + uid})
	}
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: row}}
}

// Ask sends a question that waits for the person's approval, as a
// message of its own, with Approve and Deny buttons labelled with its
// code. A part too long to take the request's line goes first, alone.
func (a *Adapter) Ask(ctx context.Context, rt any, part string, q bridge.Question, user string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	text, salt := part+bridge.AskLine(q), ""
	if len([]rune(text)) > MaxMessage {
		if _, err := a.post(ctx, r, part, nil, nonce(ctx, "")); err != nil {
			return err
		}
		text, salt = strings.TrimSpace(bridge.AskLine(q)), "ask"
	}
	_, err = a.post(ctx, r, text, buttons(q, user), nonce(ctx, salt))
	return err
}

// pressOf reads a button's custom id: verb:approval:owner.
func pressOf(customID string) (verb, id, owner string) {
	verb, rest, _ := strings.Cut(customID, ":")
	id, owner, _ = strings.Cut(rest, ":")
	return verb, id, owner
}

// press turns a press of Approve or Deny into the chat's /approve or
// /deny from the person who pressed, and shows on the question what
// they chose, without its buttons. A press by anyone else is answered
// to them alone and decides nothing; a press that cannot count
// (answered, expired) is told to the presser, and ends the question
// when the request is over.
func (a *Adapter) press(ctx context.Context, i *discordgo.Interaction) {
	user, member := presser(i)
	verb, id, owner := pressOf(i.MessageComponentData().CustomID)
	if user == nil || (verb != pressApprove && verb != pressDeny && verb != pressAlways) || id == "" {
		a.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
		return
	}
	whisper := func(text string) {
		a.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral}})
	}
	if user.ID != owner || !a.allowed(ctx, i.GuildID, user, member) {
		a.log.Warn("discord: refused a button press by someone other than the person asked", "user_id", user.ID, "channel_id", i.ChannelID)
		whisper(bridge.TextNotYours)
		return
	}
	key := chatKey(i.GuildID, i.ChannelID)
	can, err := a.router.Answerable(ctx, key, "discord:"+user.ID, id)
	switch {
	case err != nil:
		a.log.Error("discord: could not check a button press", "channel_id", i.ChannelID, "err", err)
		whisper("Sorry, I could not check that request just now. Please press again in a moment.")
		return
	case !can.OK && can.Ended:
		a.closeQuestion(ctx, i, can.Why)
		return
	case !can.OK:
		whisper(can.Why)
		return
	}
	command, chose := "/approve ", "Approve"
	switch verb {
	case pressDeny:
		command, chose = "/deny ", "Deny"
	case pressAlways:
		command, chose = "/always ", "Always allow"
	}
	r := route{Channel: i.ChannelID, Guild: i.GuildID}
	if i.Message != nil && i.Message.Flags&discordgo.MessageFlagsEphemeral != 0 {
		// A question only the person saw (a slash command's): so is what
		// follows it.
		r.App, r.Token, r.Ephemeral = i.AppID, i.Token, true
	}
	if _, err := a.pipe.Receive(ctx, interactionRef(i.ID), nil, func() (bridge.Pending, bool) {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: "discord:" + user.ID, Text: command + id}, Route: r.encode()}, true
	}); err != nil {
		a.log.Error("discord: a button press could not be stored", "interaction", i.ID, "err", err)
		whisper(bridge.TextNotSaved)
		return
	}
	a.closeQuestion(ctx, i, "You chose: "+chose+".")
}

// closeQuestion answers a press by editing the question to end with
// note, without its buttons.
func (a *Adapter) closeQuestion(ctx context.Context, i *discordgo.Interaction, note string) {
	text := note
	if i.Message != nil {
		text = strings.TrimSpace(i.Message.Content) + "\n\n" + note
	}
	a.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage,
		Data: &discordgo.InteractionResponseData{Content: cut(text, MaxMessage), Components: []discordgo.MessageComponent{}}})
}
