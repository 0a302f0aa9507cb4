package whatsapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/chat"
)

// The chat's small states in the store, each under its prefix and the
// person's number: the replicas of a deployment share them.
const (
	// stateSeen is when the person last wrote (Unix seconds): the
	// customer-service window runs 24 hours from it.
	stateSeen = "whatsapp:seen:"
	// stateInvited is when reengage_template was last sent.
	stateInvited = "whatsapp:invited:"
	// stateSent is the record of the last parts sent, with their
	// statuses.
	stateSent = "whatsapp:sent:"
)

// Bounds of what a chat's states keep.
const (
	// keepSent is how many sent parts the record keeps.
	keepSent = 16
	// keepHeld is how many held messages are kept; older ones are
	// dropped and counted.
	keepHeld = 20
)

// ErrWindowClosed is SendFile's error outside the customer-service
// window: WhatsApp takes no file until the person writes again.
var ErrWindowClosed = errors.New("whatsapp: the person last wrote more than 24 hours ago, and WhatsApp takes nothing but an approved template until they write again")

// TextHeld begins the message a person gets when they write again after
// answers were held; %s says how many.
const TextHeld = "While WhatsApp's 24-hour window was closed (a business may write freely only within 24 hours of your last message), I couldn't send you %s. Here it is:"

// textHeldMany is TextHeld for more than one message.
const textHeldMany = "While WhatsApp's 24-hour window was closed (a business may write freely only within 24 hours of your last message), I couldn't send you %s. Here they are:"

// stateInt reads a number kept under key; 0 when there is none.
func (a *Adapter) stateInt(ctx context.Context, key string) (int64, error) {
	v, err := a.store.State(ctx, key)
	if err != nil || v == "" {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("whatsapp: state %s holds %q: %w", key, v, err)
	}
	return n, nil
}

// open reports whether the route's person may be sent free text now:
// they wrote within the window, by the route's own message or by what
// the store says of the chat.
func (a *Adapter) open(ctx context.Context, r route) (bool, error) {
	now := a.cfg.now()
	if r.At > 0 && now.Sub(time.Unix(r.At, 0)) < Window {
		return true, nil
	}
	seen, err := a.stateInt(ctx, stateSeen+r.To)
	if err != nil {
		return false, fmt.Errorf("whatsapp: cannot read the chat's window: %w", err)
	}
	return seen > 0 && now.Sub(time.Unix(seen, 0)) < Window, nil
}

// Store is what the channel keeps: its inbox and small states, and the
// messages each chat holds for the person's next message, kept a row
// each so that processes holding and giving them at the same instant
// lose none. store.DB is one.
type Store interface {
	bridge.Store
	// HoldMessage keeps text for chat after what it holds, at most keep
	// (older ones dropped and counted), and returns how many it holds.
	HoldMessage(ctx context.Context, chat, text string, keep int) (int, error)
	// TakeHeldMessages takes what chat holds for the message by, and
	// returns all by took (now and before), with the dropped count.
	TakeHeldMessages(ctx context.Context, chat, by string) ([]string, int, error)
	// ForgetHeldMessages deletes what by took, once given.
	ForgetHeldMessages(ctx context.Context, chat, by string) error
}

// held is what a chat keeps for the person's next message.
type held struct {
	Parts []string
	// Dropped counts older ones dropped to keep keepHeld.
	Dropped int
}

// opened records that the person wrote (r.At) and, when answers were
// held for them, stores the message that gives them, ahead of the one
// they just sent. An error means the message must not be acknowledged.
func (a *Adapter) opened(ctx context.Context, r route) error {
	unlock := a.lock(r.To)
	defer unlock()
	seen, err := a.stateInt(ctx, stateSeen+r.To)
	if err != nil {
		return err
	}
	if r.At > seen {
		if err := a.store.SetState(ctx, stateSeen+r.To, strconv.FormatInt(r.At, 10)); err != nil {
			return fmt.Errorf("whatsapp: cannot record the chat's window: %w", err)
		}
	}
	// This message gave the held answers already (it is delivered again
	// after a failure that came later): what is held now is for the next.
	ref := "held:" + r.Msg
	given, err := a.pipe.Seen(ctx, ref)
	if err != nil {
		return err
	}
	if given {
		return a.store.ForgetHeldMessages(ctx, chatKey(r.To), r.Msg)
	}
	// Taken for this message, in the store: what another process holds
	// after this stays for the next message, and this message, delivered
	// again after a failure below, takes the same again.
	parts, dropped, err := a.store.TakeHeldMessages(ctx, chatKey(r.To), r.Msg)
	if err != nil || len(parts) == 0 {
		return err
	}
	h := held{Parts: parts, Dropped: dropped}
	// Stored first, forgotten after: a crash in between gives them once,
	// as the inbox knows this id.
	if _, err := a.pipe.Accept(ctx, bridge.Pending{ID: ref, Inbound: chat.Inbound{ChatKey: chatKey(r.To)},
		Route: r.encode(), Reply: heldText(h)}); err != nil {
		return err
	}
	a.log.Info("whatsapp: the person wrote again; the answers held while the window was closed are sent", "to", "+"+r.To, "count", len(h.Parts))
	return a.store.ForgetHeldMessages(ctx, chatKey(r.To), r.Msg)
}

// heldText is the message that gives the held answers.
func heldText(h held) string {
	var b strings.Builder
	n := len(h.Parts)
	if n == 1 {
		fmt.Fprintf(&b, TextHeld, "1 message")
	} else {
		fmt.Fprintf(&b, textHeldMany, strconv.Itoa(n)+" messages")
	}
	if h.Dropped > 0 {
		fmt.Fprintf(&b, " (%d older ones did not fit and are left out.)", h.Dropped)
	}
	for _, p := range h.Parts {
		b.WriteString("\n\n")
		b.WriteString(p)
	}
	return b.String()
}

// hold keeps text for the person's next message, because the window is
// closed, and invites them back with reengage_template when it is set.
func (a *Adapter) hold(ctx context.Context, to, text string) error {
	unlock := a.lock(to)
	defer unlock()
	return a.holdLocked(ctx, to, text)
}

func (a *Adapter) holdLocked(ctx context.Context, to, text string) error {
	n, err := a.store.HoldMessage(ctx, chatKey(to), text, keepHeld)
	if err != nil {
		return fmt.Errorf("whatsapp: cannot hold a message: %w", err)
	}
	a.log.Warn("whatsapp: the 24-hour window is closed (the person last wrote more than 24 hours ago); the message is held and given to them when they write again",
		"to", "+"+to, "held", n)
	a.invite(ctx, to)
	return nil
}

// invite sends reengage_template, once since the person last wrote.
func (a *Adapter) invite(ctx context.Context, to string) {
	if a.cfg.ReengageTemplate == "" {
		return
	}
	name, lang, err := template(a.cfg.ReengageTemplate)
	if err != nil {
		return // refused by Check
	}
	seen, err1 := a.stateInt(ctx, stateSeen+to)
	invited, err2 := a.stateInt(ctx, stateInvited+to)
	if err := errors.Join(err1, err2); err != nil {
		a.log.Error("whatsapp: cannot read whether the template was sent", "err", err)
		return
	}
	if invited != 0 && invited >= seen {
		return
	}
	_, err = a.api.message(ctx, to, map[string]any{"type": "template",
		"template": map[string]any{"name": name, "language": map[string]string{"code": lang}}})
	if err != nil {
		a.log.Error("whatsapp: the template whatsapp.reengage_template could not be sent (is it approved, in this language?)", "template", name, "language", lang, "err", err)
		return
	}
	a.log.Info("whatsapp: sent whatsapp.reengage_template to invite the person back", "to", "+"+to, "template", name)
	now := strconv.FormatInt(max(a.cfg.now().Unix(), seen+1), 10)
	if err := a.store.SetState(ctx, stateInvited+to, now); err != nil {
		a.log.Error("whatsapp: cannot record that the template was sent", "err", err)
	}
}

// sentPart is a message the bot sent, as the chat's record keeps it.
type sentPart struct {
	ID string `json:"id"`
	// Text is the part as the model wrote it (Markdown), for sending it
	// again; "" for a file.
	Text string `json:"text,omitempty"`
	// Try is 1 for the first send, 2 for the send after a failure.
	Try int `json:"try,omitempty"`
	// Status is the latest WhatsApp reported: sent, delivered, read or
	// failed; Error says why it failed.
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Handled: a failure was acted on.
	Handled bool  `json:"handled,omitempty"`
	At      int64 `json:"at"`
}

// sent is the chat's record of the last parts sent; empty when it
// cannot be read.
func (a *Adapter) sent(ctx context.Context, to string) []sentPart {
	v, err := a.store.State(ctx, stateSent+to)
	if err != nil || v == "" {
		return nil
	}
	var out []sentPart
	if json.Unmarshal([]byte(v), &out) != nil {
		return nil
	}
	return out
}

// record adds a sent part to the chat's record.
func (a *Adapter) record(ctx context.Context, to string, p sentPart) {
	unlock := a.lock(to)
	defer unlock()
	a.recordLocked(ctx, to, p)
}

func (a *Adapter) recordLocked(ctx context.Context, to string, p sentPart) {
	p.At = a.cfg.now().Unix()
	parts := append(a.sent(ctx, to), p)
	if over := len(parts) - keepSent; over > 0 {
		parts = parts[over:]
	}
	a.writeSent(ctx, to, parts)
}

func (a *Adapter) writeSent(ctx context.Context, to string, parts []sentPart) {
	b, _ := json.Marshal(parts)
	if err := a.store.SetState(context.WithoutCancel(ctx), stateSent+to, string(b)); err != nil {
		a.log.Warn("whatsapp: cannot record a sent message; its statuses are only logged", "to", "+"+to, "err", err)
	}
}

// statusRank orders statuses: a late "delivered" does not undo "read";
// 0 for what is not a status.
func statusRank(s string) int {
	switch s {
	case "sent":
		return 1
	case "delivered":
		return 2
	case "read":
		return 3
	case "failed":
		return 4
	}
	return 0
}

// status records WhatsApp's news of a sent message. A failure is acted
// on once: outside the window the part is held (and the template
// sent); otherwise it is sent once more, and a second failure is
// logged and held with a sentence saying so, so the person hears of it
// when they next write.
func (a *Adapter) status(ctx context.Context, s status) error {
	to := Digits(s.RecipientID)
	if to == "" || s.ID == "" || statusRank(s.Status) == 0 {
		return nil
	}
	var why string
	code := 0
	if len(s.Errors) > 0 {
		e := s.Errors[0]
		code, why = e.Code, strings.TrimSpace(e.Title+" "+e.ErrorData.Details)
	}
	unlock := a.lock(to)
	defer unlock()
	parts := a.sent(ctx, to)
	i := -1
	for k := range parts {
		if parts[k].ID == s.ID {
			i = k
		}
	}
	if i < 0 {
		if s.Status == "failed" {
			a.log.Warn("whatsapp: WhatsApp could not deliver a message no longer in the chat's record", "to", "+"+to, "message_id", s.ID, "code", code, "why", why)
		}
		return nil
	}
	p := &parts[i]
	a.log.Debug("whatsapp: message status", "to", "+"+to, "message_id", s.ID, "status", s.Status)
	if statusRank(s.Status) <= statusRank(p.Status) && s.Status != "failed" {
		return nil
	}
	p.Status = s.Status
	if s.Status != "failed" || p.Handled {
		a.writeSent(ctx, to, parts)
		return nil
	}
	p.Error = fmt.Sprintf("%d %s", code, why)
	a.log.Warn("whatsapp: WhatsApp could not deliver a message", "to", "+"+to, "message_id", s.ID, "code", code, "why", why, "try", p.Try)
	text := p.Text
	switch {
	case text == "":
		// A file: nothing to send again as text.
	case code == codeWindow:
		if err := a.holdLocked(ctx, to, text); err != nil {
			return err
		}
	case p.Try < 2:
		id, err := a.api.message(ctx, to, textMessage(text))
		if err != nil {
			a.log.Error("whatsapp: a message WhatsApp could not deliver could not be sent again either; it is held for the person's next message", "to", "+"+to, "err", err)
			if err := a.holdLocked(ctx, to, text); err != nil {
				return err
			}
			break
		}
		parts = append(parts, sentPart{ID: id, Text: text, Try: p.Try + 1, At: a.cfg.now().Unix()})
	default:
		a.log.Error("whatsapp: WhatsApp could not deliver a message sent twice; it is held for the person's next message", "to", "+"+to, "code", code, "why", why)
		if err := a.holdLocked(ctx, to, "(WhatsApp could not deliver this message earlier.)\n\n"+text); err != nil {
			return err
		}
	}
	p = &parts[i]
	p.Handled = true
	if over := len(parts) - keepSent; over > 0 {
		parts = parts[over:]
	}
	a.writeSent(ctx, to, parts)
	return nil
}
