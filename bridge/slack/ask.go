package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	slackapi "github.com/slack-go/slack"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools"
)

// Action ids of the approval buttons; a button's value is
// "<approval id>:<team>:<user>", the only person whose press counts (the
// engine checks it again).
const (
	actionApprove = "loadout_approve"
	actionDeny    = "loadout_deny"
	actionAlways  = "loadout_always"
	// actionAnswer is a choice of a running tool's question; its value
	// is "<code>:<n>:<team>:<user>".
	actionAnswer = "loadout_answer"
)

// maxChoiceButtons is the most choices shown as buttons (Slack allows 25
// elements in an actions block); more are listed, answered by number.
const maxChoiceButtons = 20

// Choose posts a running tool's question with a button per choice; a
// press by the person asked is their "/answer <code> <n>"; anyone
// else's is refused privately.
func (a *Adapter) Choose(ctx context.Context, rt any, text, code, user string, choices []string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if len(choices) > maxChoiceButtons {
		for i, c := range choices {
			text += fmt.Sprintf("\n%d. %s", i+1, c)
		}
		return a.deliver(ctx, r, nil, Mrkdwn(text), nil)
	}
	body := Mrkdwn(text)
	var buttons []slackapi.BlockElement
	for i, c := range choices {
		value := fmt.Sprintf("%s:%d:%s", strings.TrimPrefix(code, "#"), i+1, strings.TrimPrefix(user, "slack:"))
		buttons = append(buttons, slackapi.NewButtonBlockElement(fmt.Sprintf("%s_%d", actionAnswer, i+1), value,
			slackapi.NewTextBlockObject(slackapi.PlainTextType, tools.Shorten(c, 70), false, false)))
	}
	return a.deliver(ctx, r, nil, body, []slackapi.Block{
		slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, body, false, false), nil, nil),
		slackapi.NewActionBlock("loadout_question", buttons...),
	})
}

// askBlocks is a question with Approve and Deny buttons, and Always
// allow where the question offers it.
func askBlocks(body string, q bridge.Question, user string) []slackapi.Block {
	value := q.ID + ":" + strings.TrimPrefix(user, "slack:")
	buttons := []slackapi.BlockElement{
		slackapi.NewButtonBlockElement(actionApprove, value, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Approve "+chat.CodeOf(q.ID), false, false)).WithStyle(slackapi.StylePrimary),
		slackapi.NewButtonBlockElement(actionDeny, value, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Deny "+chat.CodeOf(q.ID), false, false)).WithStyle(slackapi.StyleDanger),
	}
	if q.Always != "" {
		buttons = append(buttons, slackapi.NewButtonBlockElement(actionAlways, value, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Always allow "+chat.CodeOf(q.ID), false, false)))
	}
	return []slackapi.Block{
		slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, body, false, false), nil, nil),
		slackapi.NewActionBlock("loadout_approval", buttons...),
	}
}

// Ask posts a question that waits for the person's approval, as a
// message of its own, with Approve and Deny buttons labelled with its
// code (as the slash command's private answer when it came from one).
func (a *Adapter) Ask(ctx context.Context, rt any, part string, q bridge.Question, user string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	body := Mrkdwn(part + bridge.AskLine(q))
	return a.deliver(ctx, r, nil, body, askBlocks(body, q, user))
}

// interaction handles a press of Approve or Deny, from Socket Mode or the
// interactivity endpoint: the person asked gets their /approve or /deny
// run in the chat, and the question shows what they chose instead of the
// buttons; anyone else is told privately that it is not theirs to answer.
// An error means the press was not stored.
func (a *Adapter) interaction(ctx context.Context, cb slackapi.InteractionCallback) error {
	if cb.Type != slackapi.InteractionTypeBlockActions || !a.identified() {
		if !a.identified() {
			return errNotReady
		}
		return nil
	}
	for _, act := range cb.ActionCallback.BlockActions {
		if strings.HasPrefix(act.ActionID, actionAnswer) {
			if err := a.answer(ctx, cb, act); err != nil {
				return err
			}
			continue
		}
		if act.ActionID != actionApprove && act.ActionID != actionDeny && act.ActionID != actionAlways {
			continue
		}
		id, owner, _ := strings.Cut(act.Value, ":")
		team := cb.User.TeamID
		if team == "" {
			team = cb.Team.ID
		}
		channel := cb.Container.ChannelID
		if channel == "" {
			channel = cb.Channel.ID
		}
		if id == "" || channel == "" {
			continue
		}
		if owner != team+":"+cb.User.ID || !a.allowed(team, cb.User.ID) {
			a.log.Warn("slack: refused a button press by someone other than the person asked", "user_id", cb.User.ID, "slack_channel", channel)
			a.whisper(ctx, channel, cb.User.ID, bridge.TextNotYours)
			continue
		}
		command, chose := "/approve ", "Approve"
		switch act.ActionID {
		case actionDeny:
			command, chose = "/deny ", "Deny"
		case actionAlways:
			command, chose = "/always ", "Always allow"
		}
		thread := cb.Container.ThreadTs
		if thread == "" {
			thread = cb.Message.ThreadTimestamp
		}
		chatKey := "slack:" + cb.Team.ID + ":" + channel
		r := route{Channel: channel, Thread: thread}
		if !strings.HasPrefix(channel, "D") {
			// A channel conversation is its thread.
			chatKey += ":" + thread
		}
		// A press that cannot count (expired, answered, forged) is
		// refused here, to the presser alone; the question changes
		// only when the request really ended.
		if can, err := a.router.Answerable(ctx, chatKey, "slack:"+team+":"+cb.User.ID, id); err != nil || !can.OK {
			if err != nil {
				return err // not stored: Slack tries again
			}
			a.whisper(ctx, channel, cb.User.ID, can.Why)
			if can.Ended {
				a.replaceButtons(ctx, cb, channel, can.Why)
			}
			continue
		}
		event := "action:" + cb.Container.MessageTs + ":" + act.ActionTs
		if _, err := a.pipe.Accept(ctx, bridge.Pending{ID: event,
			Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "slack:" + team + ":" + cb.User.ID, Text: command + id},
			Route:   r.encode()}); err != nil {
			return err
		}
		a.chosen(ctx, cb, channel, chose)
	}
	return nil
}

// answer takes a press of a question's choice: the person asked gets
// their "/answer <code> <n>" handed to the question; anyone else, or a
// question no longer waiting, is told privately.
func (a *Adapter) answer(ctx context.Context, cb slackapi.InteractionCallback, act *slackapi.BlockAction) error {
	parts := strings.SplitN(act.Value, ":", 3)
	team := cb.User.TeamID
	if team == "" {
		team = cb.Team.ID
	}
	channel := cb.Container.ChannelID
	if channel == "" {
		channel = cb.Channel.ID
	}
	if len(parts) != 3 || channel == "" {
		return nil
	}
	thread := cb.Container.ThreadTs
	if thread == "" {
		thread = cb.Message.ThreadTimestamp
	}
	chatKey := "slack:" + cb.Team.ID + ":" + channel
	if !strings.HasPrefix(channel, "D") {
		chatKey += ":" + thread
	}
	userKey := "slack:" + team + ":" + cb.User.ID
	if parts[2] != team+":"+cb.User.ID || !a.allowed(team, cb.User.ID) {
		a.log.Warn("slack: refused a button press by someone other than the person asked", "user_id", cb.User.ID, "slack_channel", channel)
		a.whisper(ctx, channel, cb.User.ID, bridge.TextNotYours)
		return nil
	}
	if !a.pipe.Asks(ctx, chatKey, userKey, parts[0]) {
		a.whisper(ctx, channel, cb.User.ID, bridge.TextNoQuestion)
		return nil
	}
	r := route{Channel: channel, Thread: thread}
	if _, err := a.pipe.Accept(ctx, bridge.Pending{ID: "action:" + cb.Container.MessageTs + ":" + act.ActionTs,
		Inbound: chat.Inbound{ChatKey: chatKey, UserKey: userKey, Text: "/answer " + parts[0] + " " + parts[1]},
		Route:   r.encode()}); err != nil {
		return err
	}
	chose := "your answer"
	if act.Text.Text != "" {
		chose = act.Text.Text
	}
	a.chosen(ctx, cb, channel, chose)
	return nil
}

// chosen replaces the question's buttons with what the person chose.
func (a *Adapter) chosen(ctx context.Context, cb slackapi.InteractionCallback, channel, chose string) {
	a.replaceButtons(ctx, cb, channel, "You chose: *"+chose+"*.")
}

// replaceButtons replaces the question's buttons with a note.
func (a *Adapter) replaceButtons(ctx context.Context, cb slackapi.InteractionCallback, channel, note string) {
	ts := cb.Container.MessageTs
	if ts == "" || cb.Container.IsEphemeral {
		return
	}
	text := cb.Message.Text
	blocks := []slackapi.Block{
		slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, text, false, false), nil, nil),
		slackapi.NewContextBlock("loadout_chosen", slackapi.NewTextBlockObject(slackapi.MarkdownType, note, false, false)),
	}
	if _, _, _, err := a.api.UpdateMessageContext(ctx, channel, ts, slackapi.MsgOptionText(text+"\n"+strings.ReplaceAll(note, "*", ""), false), slackapi.MsgOptionBlocks(blocks...)); err != nil && ctx.Err() == nil {
		a.log.Warn("slack: could not take the buttons off a question", "err", err)
	}
}

// whisper tells one person something only they see.
func (a *Adapter) whisper(ctx context.Context, channel, user, text string) {
	if _, err := a.api.PostEphemeralContext(ctx, channel, user, slackapi.MsgOptionText(text, false)); err != nil && ctx.Err() == nil {
		a.log.Warn("slack: could not answer a button press", "err", err)
	}
}

// InteractivityHandler serves button presses when Socket Mode is off
// (mount it at /slack/interactivity, the app's Interactivity request
// URL), with the same signature checks as EventsHandler. A press that
// cannot be stored is answered 500, so Slack tries again.
func (a *Adapter) InteractivityHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verify(w, r)
		if !ok {
			return
		}
		form, err := url.ParseQuery(string(body))
		var cb slackapi.InteractionCallback
		if err == nil {
			err = json.NewDecoder(bytes.NewReader([]byte(form.Get("payload")))).Decode(&cb)
		}
		if err != nil {
			http.Error(w, "malformed interaction", http.StatusBadRequest)
			return
		}
		if err := a.interaction(r.Context(), cb); err != nil {
			a.refuse(w, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
