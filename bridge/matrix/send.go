package matrix

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/yuin/goldmark"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"loadout/bridge"
)

// The reactions that answer a question: the bot puts both under it, and
// the asker's press of one counts.
const (
	reactApprove = "✅"
	reactDeny    = "❌"
)

// Split cuts an answer into messages of at most ChunkSize characters.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, a.cfg.ChunkSize) }

// content is part as a message: its Markdown rendered to HTML
// (org.matrix.custom.html), the Markdown itself as the plain body, in
// the route's thread.
// Raw HTML the model writes is not passed on (goldmark's default), and a
// part whose HTML says no more than its text goes without HTML.
func content(r route, part string) *event.MessageEventContent {
	c := event.MessageEventContent{MsgType: event.MsgText, Body: part}
	var b strings.Builder
	if err := goldmark.Convert([]byte(part), &b); err == nil {
		if h := strings.TrimSpace(b.String()); h != "<p>"+html.EscapeString(part)+"</p>" {
			c.Format, c.FormattedBody = event.FormatHTML, h
		}
	}
	c.Mentions = &event.Mentions{}
	r.relate(&c)
	return &c
}

// relate puts a message of the route in its thread.
func (r route) relate(c *event.MessageEventContent) {
	if r.Thread != "" {
		c.RelatesTo = (&event.RelatesTo{}).SetThread(r.Thread, r.Event)
	}
}

// Send sends one part. The client retries what the homeserver lets it
// (rate limits, server errors). A part answering a person's message goes
// out under a transaction id made of the message and the part, so a part
// sent again after a crash (the homeserver took it, the inbox never
// heard) is recognised by the homeserver and not shown twice.
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	var txn string
	if r.Event != "" {
		h := sha256.Sum256([]byte(string(r.Room) + "\x00" + string(r.Thread) + "\x00" + string(r.Event) + "\x00" + part))
		txn = txnPrefix + hex.EncodeToString(h[:16])
		// A part the homeserver took before a crash, as the first sync
		// since showed, is not sent again. (A homeserver recognises a
		// repeated transaction too, but Dendrite forgets one whose
		// sender went away before the answer.)
		known, err := a.sentTxnList(ctx, r.Room)
		if err != nil {
			return err
		}
		if slices.Contains(known, txn) {
			a.log.Info("matrix: a part the homeserver took before a restart is not sent again", "room", r.Room)
			return nil
		}
	}
	_, err = a.send(ctx, r.Room, content(r, part), txn)
	return err
}

// txnPrefix starts the transaction ids of parts answering a message.
const txnPrefix = "loadout."

// send sends c to room under the transaction txn ("" for a new one).
func (a *Adapter) send(ctx context.Context, room id.RoomID, c *event.MessageEventContent, txn ...string) (id.EventID, error) {
	var extra []mautrix.ReqSendEvent
	if len(txn) > 0 && txn[0] != "" {
		extra = append(extra, mautrix.ReqSendEvent{TransactionID: txn[0]})
	}
	res, err := a.cli.SendMessageEvent(ctx, room, event.EventMessage, c, extra...)
	if err != nil {
		return "", fmt.Errorf("matrix: send to %s: %w", room, err)
	}
	a.log.Debug("matrix: sent", "room", room, "event", res.EventID, "txn", txn)
	return res.EventID, nil
}

// Draft posts the answer so far (draft nil) or edits the posted draft
// (m.replace); the reference is the draft's event id.
func (a *Adapter) Draft(ctx context.Context, rt any, draft []byte, text string) ([]byte, error) {
	r, err := asRoute(rt)
	if err != nil {
		return nil, err
	}
	if draft == nil {
		ev, err := a.send(ctx, r.Room, content(r, text))
		return []byte(ev), err
	}
	return draft, a.edit(ctx, r, id.EventID(draft), text)
}

// Replace turns the draft into part.
func (a *Adapter) Replace(ctx context.Context, rt any, draft []byte, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	return a.edit(ctx, r, id.EventID(draft), part)
}

func (a *Adapter) edit(ctx context.Context, r route, original id.EventID, text string) error {
	c := content(route{Room: r.Room}, text)
	c.SetEdit(original)
	_, err := a.send(ctx, r.Room, c)
	return err
}

// Working shows the bot typing in the route's room until stop, renewed
// while the turn runs.
func (a *Adapter) Working(ctx context.Context, rt any) (stop func()) {
	r, err := asRoute(rt)
	if err != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Second)
		defer t.Stop()
		for {
			if _, err := a.cli.UserTyping(ctx, r.Room, true, 30*time.Second); err != nil && ctx.Err() == nil {
				a.log.Debug("matrix: typing notification failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			a.cli.UserTyping(ctx, r.Room, false, 0)
		})
	}
}

// question is what the bot keeps of a question it asked: the approval,
// the one person whose reaction answers it, and its thread.
type question struct {
	ID     string     `json:"id"`
	User   id.UserID  `json:"user"`
	Thread id.EventID `json:"thread,omitempty"`
	// Text is the question as sent, which its answer edits.
	Text string `json:"text"`
}

// Ask sends a question as a message of its own, with its code, and puts
// ✅ and ❌ under it: the asker's reaction with either answers it.
func (a *Adapter) Ask(ctx context.Context, rt any, part string, ask bridge.Question, user string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	approval := ask.ID
	text := part + bridge.AskLine(ask)
	ev, err := a.send(ctx, r.Room, content(r, text))
	if err != nil {
		return err
	}
	q, _ := json.Marshal(question{ID: approval, User: id.UserID(strings.TrimPrefix(user, "matrix:")), Thread: r.Thread, Text: text})
	if err := a.store.SetState(ctx, stateAskPrefix+string(ev), string(q)); err != nil {
		// The question went out; /approve still answers it.
		a.log.Error("matrix: could not keep a question; its reactions will not count", "event", ev, "err", err)
		return nil
	}
	for _, key := range []string{reactApprove, reactDeny} {
		if _, err := a.cli.SendReaction(ctx, r.Room, ev, key); err != nil && ctx.Err() == nil {
			a.log.Debug("matrix: could not react to a question", "err", err)
		}
	}
	return nil
}

// chosen edits the question ev to end with what its asker chose, once
// the choice is stored.
func (a *Adapter) chosen(ctx context.Context, room id.RoomID, ev id.EventID, q question, approve bool) {
	choice := "Approve"
	if !approve {
		choice = "Deny"
	}
	if err := a.edit(ctx, route{Room: room}, ev, q.Text+"\n\nYou chose: "+choice+"."); err != nil && ctx.Err() == nil {
		a.log.Debug("matrix: could not mark a question answered", "err", err)
	}
}

// question reads what the bot kept of the question ev; zero when ev is
// none.
func (a *Adapter) question(ctx context.Context, ev id.EventID) (question, error) {
	var q question
	if ev == "" {
		return q, nil
	}
	raw, err := a.store.State(ctx, stateAskPrefix+string(ev))
	if err != nil || raw == "" {
		return q, err
	}
	if err := json.Unmarshal([]byte(raw), &q); err != nil {
		a.log.Warn("matrix: unreadable kept question", "event", ev, "err", err)
	}
	return q, nil
}
