package feishu

import (
	"context"
	"strings"

	"loadout/bridge"
	"loadout/chat"
)

// What a press of an approval card's button does: its value's "verb".
const (
	pressApprove = "approve"
	pressDeny    = "deny"
	pressAlways  = "always"
)

// Toasts a press is answered with.
const (
	// TextPressUnchecked answers a press that could not be checked.
	TextPressUnchecked = "Sorry, I could not check that request just now. Please press again in a moment."
	textTaken          = "Got it."
)

// Ask sends a question that waits for the person's approval as an
// interactive card of its own: the part, its code, and Approve and Deny
// buttons (and Always allow where it is offered) labelled with the code.
// Each button's value names the question, the chat and the person
// asked, whose press alone counts.
func (a *Adapter) Ask(ctx context.Context, rt any, part string, q bridge.Question, user string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	_, err = a.api.message(ctx, r, "interactive", card(part+bridge.AskLine(q), q, strings.TrimPrefix(user, "feishu:"), r), partUUID(ctx))
	return err
}

// card is an approval card: its Markdown text and its buttons.
func card(md string, q bridge.Question, owner string, r route) map[string]any {
	code := chat.CodeOf(q.ID)
	button := func(verb, label, kind string) map[string]any {
		return map[string]any{"tag": "button", "type": kind,
			"text":  map[string]string{"tag": "plain_text", "content": label + " " + code},
			"value": map[string]string{"verb": verb, "q": q.ID, "by": owner, "to": r.To}}
	}
	buttons := []any{button(pressApprove, "Approve", "primary"), button(pressDeny, "Deny", "danger")}
	if q.Always != "" {
		buttons = append(buttons, button(pressAlways, "Always allow", "default"))
	}
	return map[string]any{
		"config":   map[string]bool{"wide_screen_mode": true},
		"elements": []any{map[string]string{"tag": "markdown", "content": md}, map[string]any{"tag": "action", "actions": buttons}},
	}
}

// toast is what the presser sees: info, success or error.
type toast struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// press takes a press of an approval card's button: the person asked
// gets their /approve, /deny or /always run in the chat; anyone else,
// or a press that cannot count (answered, expired, forged), is told why
// in a toast only they see, and decides nothing. An error means the
// press was not stored.
func (a *Adapter) press(ctx context.Context, event string, e pressEvent) (toast, error) {
	str := func(k string) string { s, _ := e.Action.Value[k].(string); return s }
	verb, id, owner, to := str("verb"), str("q"), str("by"), str("to")
	if (verb != pressApprove && verb != pressDeny && verb != pressAlways) || id == "" || !plainID(to) {
		return toast{Type: "error", Content: "This button is not one of mine."}, nil
	}
	presser := e.Operator.OpenID
	if presser == "" || presser != owner || !a.allow.Allowed(presser, "") {
		a.log.Warn("feishu: refused a card press by someone other than the person asked", "open_id", presser)
		return toast{Type: "error", Content: bridge.TextNotYours}, nil
	}
	key := "feishu:" + to
	raw, err := a.Route(key)
	if err != nil {
		return toast{Type: "error", Content: "This button is not one of mine."}, nil
	}
	user := "feishu:" + presser
	can, err := a.router.Answerable(ctx, key, user, id)
	if err != nil {
		a.log.Error("feishu: could not check a card press", "open_id", presser, "err", err)
		return toast{Type: "error", Content: TextPressUnchecked}, nil
	}
	if !can.OK {
		return toast{Type: "info", Content: can.Why}, nil
	}
	if _, err := a.pipe.Accept(ctx, bridge.Pending{ID: eventRef(event),
		Inbound: chat.Inbound{ChatKey: key, UserKey: user, Text: "/" + verb + " " + id}, Route: raw}); err != nil {
		return toast{}, err
	}
	return toast{Type: "success", Content: textTaken}, nil
}
