package signal

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"loadout/bridge"
	"loadout/chat"
)

// The reactions that answer a question.
const (
	emojiApprove = "👍"
	emojiDeny    = "👎"
	emojiAlways  = "✅"
)

// keptQuestions is how many of a chat's latest questions a reaction can
// answer.
const keptQuestions = 20

// asked is a question the bot sent, as the store keeps it for the
// reactions that answer it: the message's timestamp, the approval, and
// the only person whose reaction counts.
type asked struct {
	TS     int64  `json:"ts"`
	ID     string `json:"id"`
	User   string `json:"user"`
	Always bool   `json:"always,omitempty"`
}

// askLine ends a question: how to answer it, with its code.
func askLine(q bridge.Question) string {
	code := chat.CodeOf(q.ID)
	if q.Always != "" {
		return fmt.Sprintf("\n\nRequest %s — react %s to approve, %s to deny or %s to always allow (or send /approve %s, /deny %s, /always %s).",
			code, emojiApprove, emojiDeny, emojiAlways, code, code, code)
	}
	return fmt.Sprintf("\n\nRequest %s — react %s to approve or %s to deny (or send /approve %s, /deny %s).",
		code, emojiApprove, emojiDeny, code, code)
}

// Ask sends a question that waits for the person's approval as a message
// of its own, which user alone answers with a reaction, and keeps it in
// the store so that any process can read the reaction.
func (a *Adapter) Ask(ctx context.Context, rt any, part string, q bridge.Question, user string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	// A reaction read meanwhile waits until the question is kept.
	a.asking.RLock()
	defer a.asking.RUnlock()
	ts, err := a.send(ctx, r, part+askLine(q))
	if err != nil {
		return err
	}
	if err := a.remember(ctx, r.chatKey(), asked{TS: ts, ID: q.ID, User: user, Always: q.Always != ""}); err != nil {
		// The question went out: its commands still answer it.
		a.log.Error("signal: cannot keep a question for its reactions; the commands in it still answer it", "err", err)
	}
	return nil
}

// chatKey is the chat a route sends to.
func (r route) chatKey() string {
	if r.Group != "" {
		return groupPrefix + r.Group
	}
	return personKey(r.To)
}

func askedKey(chatKey string) string { return "signal:asked:" + chatKey }

// remember adds q to the chat's latest questions in the store.
func (a *Adapter) remember(ctx context.Context, chatKey string, q asked) error {
	key := askedKey(chatKey)
	for {
		old, err := a.store.State(ctx, key)
		if err != nil {
			return err
		}
		var list []asked
		if old != "" {
			json.Unmarshal([]byte(old), &list) // unreadable: started afresh
		}
		list = append(list, q)
		if len(list) > keptQuestions {
			list = list[len(list)-keptQuestions:]
		}
		b, _ := json.Marshal(list)
		if ok, err := a.store.SwapState(ctx, key, old, string(b)); err != nil || ok {
			return err
		}
	}
}

// question is the chat's question sent at ts, if the store keeps it.
func (a *Adapter) question(ctx context.Context, chatKey string, ts int64) (asked, bool, error) {
	v, err := a.store.State(ctx, askedKey(chatKey))
	if err != nil || v == "" {
		return asked{}, false, err
	}
	var list []asked
	if json.Unmarshal([]byte(v), &list) != nil {
		return asked{}, false, nil
	}
	for _, q := range list {
		if q.TS == ts {
			return q, true, nil
		}
	}
	return asked{}, false, nil
}

// reacted takes an allowed person's reaction: one to a question of the
// bot's is that person's /approve, /deny or /always, if they are the
// person asked and the request still waits; anyone else is told it is
// not theirs, and it decides nothing. Other reactions mean nothing.
func (a *Adapter) reacted(ctx context.Context, id string, s sender, key string, r route, re *reaction) error {
	if re.IsRemove || a.account == "" || E164(re.TargetAuthorNumber) != a.account {
		return nil
	}
	var command string
	switch {
	case strings.HasPrefix(re.Emoji, emojiApprove):
		command = "/approve "
	case strings.HasPrefix(re.Emoji, emojiDeny):
		command = "/deny "
	case strings.HasPrefix(re.Emoji, emojiAlways):
		command = "/always "
	default:
		return nil
	}
	a.asking.Lock()
	q, ok, err := a.question(ctx, key, re.TargetSentTimestamp)
	a.asking.Unlock()
	if err != nil || !ok {
		return err // not a question: a reaction to an answer
	}
	if command == "/always " && !q.Always {
		return nil
	}
	user := personKey(s.id)
	r.QuoteTS, r.QuoteAuthor = 0, ""
	tell := func(text string) error {
		_, err := a.pipe.Receive(ctx, id, nil, func() (bridge.Pending, bool) {
			return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: user}, Route: routes.Encode(r), Reply: text}, true
		})
		return err
	}
	if user != q.User {
		a.log.Warn("signal: refused a reaction to a question by someone other than the person asked", "uuid", s.uuid, "number", s.number)
		return tell(bridge.TextNotYours)
	}
	can, err := a.router.Answerable(ctx, key, user, q.ID)
	if err != nil {
		return err // not stored: tried again
	}
	if !can.OK {
		return tell(can.Why)
	}
	_, err = a.pipe.Receive(ctx, id, nil, func() (bridge.Pending, bool) {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: user, Text: command + q.ID}, Route: routes.Encode(r)}, true
	})
	return err
}
