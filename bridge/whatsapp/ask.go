package whatsapp

import (
	"context"
	"strings"
	"unicode/utf8"

	"loadout/bridge"
	"loadout/chat"
)

// Ids of the approval buttons: "ok:<approval id>:<number>", "no:…" or
// "al:…" (Always allow). The number is the only person whose press
// counts; the engine checks it again.
const (
	pressApprove = "ok"
	pressDeny    = "no"
	pressAlways  = "al"
)

// maxInteractive is WhatsApp's limit on an interactive message's body.
const maxInteractive = 1024

// Ask sends a question that waits for the person's approval as an
// interactive message of its own, with reply buttons labelled with its
// code: Approve and Deny, and Always allow where it is offered (three,
// WhatsApp's most). A part too long for an interactive message's body
// goes first, alone. Outside the window the question is held with the
// commands that answer it.
func (a *Adapter) Ask(ctx context.Context, rt any, part string, q bridge.Question, user string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	open, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	if !open {
		return a.hold(ctx, r.To, part+bridge.AskHint(q))
	}
	text := part + bridge.AskLine(q)
	if utf8.RuneCountInString(Format(text)) > maxInteractive {
		if err := a.deliver(ctx, r, part, textMessage(part)); err != nil {
			return err
		}
		text = strings.TrimSpace(bridge.AskLine(q))
	}
	return a.deliver(ctx, r, text, buttons(Format(text), q, strings.TrimPrefix(user, "whatsapp:")))
}

// buttons is the interactive message of a question: its text, and
// Approve, Deny and (where offered) Always allow, bound to the approval
// and the person. A title holds at most 20 characters: "Always allow"
// and a code of five fit.
func buttons(body string, q bridge.Question, owner string) map[string]any {
	code := chat.CodeOf(q.ID)
	reply := func(verb, title string) map[string]any {
		return map[string]any{"type": "reply", "reply": map[string]string{"id": verb + ":" + q.ID + ":" + owner, "title": title + " " + code}}
	}
	bs := []any{reply(pressApprove, "Approve"), reply(pressDeny, "Deny")}
	if q.Always != "" {
		bs = append(bs, reply(pressAlways, "Always allow"))
	}
	return map[string]any{"type": "interactive", "interactive": map[string]any{
		"type":   "button",
		"body":   map[string]string{"text": body},
		"action": map[string]any{"buttons": bs},
	}}
}

// pressOf reads a button's id: verb:approval:owner.
func pressOf(id string) (verb, approval, owner string) {
	verb, rest, _ := strings.Cut(id, ":")
	approval, owner, _ = strings.Cut(rest, ":")
	return verb, approval, owner
}

// press turns a press of Approve or Deny into the chat's /approve or
// /deny from the person who pressed. A press by anyone but the person
// asked, or one that cannot count (answered, expired, forged), is
// answered with why, and decides nothing.
func (a *Adapter) press(ctx context.Context, m message, key string, r route) (bridge.Pending, bool) {
	if m.Interactive == nil || m.Interactive.ButtonReply == nil {
		return bridge.Pending{}, false
	}
	tell := func(text string) (bridge.Pending, bool) {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: key}, Route: r.encode(), Reply: text}, true
	}
	verb, id, owner := pressOf(m.Interactive.ButtonReply.ID)
	if (verb != pressApprove && verb != pressDeny && verb != pressAlways) || id == "" {
		return bridge.Pending{}, false
	}
	if owner != r.To {
		a.log.Warn("whatsapp: refused a button press by someone other than the person asked", "from", "+"+r.To)
		return tell(bridge.TextNotYours)
	}
	can, err := a.router.Answerable(ctx, key, key, id)
	if err != nil {
		a.log.Error("whatsapp: could not check a button press", "from", "+"+r.To, "err", err)
		return tell(TextPressUnchecked)
	}
	if !can.OK {
		return tell(can.Why)
	}
	command := "/approve "
	switch verb {
	case pressDeny:
		command = "/deny "
	case pressAlways:
		command = "/always "
	}
	return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: key, Text: command + id}, Route: r.encode()}, true
}
