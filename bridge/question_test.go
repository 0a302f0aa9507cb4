package bridge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools"
)

// askOnce is a handler whose turn asks its person one question and
// answers with what it got (or the error).
func askOnce(ttl time.Duration) bridge.Handler {
	return replyFunc(func(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
		if strings.HasPrefix(in.Text, "/") || in.Text != "ask" {
			return chat.Reply{Text: "turn for " + in.UserKey + ": " + in.Text}, nil
		}
		a, ok := tools.AskerFrom(ctx)
		if !ok {
			return chat.Reply{Text: "no asker"}, nil
		}
		qctx, cancel := context.WithTimeout(ctx, ttl)
		defer cancel()
		ans, err := a.Ask(qctx, tools.Question{Text: "Colour?", Choices: []string{"red", "green"}})
		switch {
		case errors.Is(err, tools.ErrAskCancelled):
			return chat.Reply{Text: "cancelled"}, nil
		case errors.Is(err, tools.ErrNotAnswered):
			return chat.Reply{Text: "expired"}, nil
		case err != nil:
			return chat.Reply{}, err
		}
		return chat.Reply{Text: "got " + ans}, nil
	})
}

func from(id, user, text string) bridge.Pending {
	p := pending(id, "c1", text)
	p.Inbound.UserKey = user
	return p
}

// A turn's question is answered by its person's next message, taken as it
// arrives though the turn still runs; another person's message waits its
// turn and is not the answer; the answer never runs a turn of its own.
func TestQuestionIsAnsweredByItsPersonOnly(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Handler: askOnce(time.Minute), Outlet: out})
	accept(t, p, from("e1", "ana", "ask"))
	sent := out.waitFor(t, 1)
	if !strings.Contains(sent[0], "Colour?") || !strings.Contains(sent[0], "1. red") || !strings.Contains(sent[0], "Question #") {
		t.Fatalf("question = %q", sent[0])
	}
	accept(t, p, from("e2", "bea", "2"))
	accept(t, p, from("e3", "ana", "2"))
	sent = out.waitFor(t, 3)
	if sent[1] != "c1:got green" || sent[2] != "c1:turn for bea: 2" {
		t.Fatalf("sent = %q", sent)
	}
	if st, _ := itemState(t, db, "e3"); st != string(bridge.StateDone) {
		t.Fatalf("the answer's event is %s", st)
	}
}

// /clear, by anyone in the chat, cancels the question (and then clears);
// /cancel by the person asked cancels it; a question nobody answers
// expires.
func TestQuestionEndsWithClearCancelOrTime(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Handler: askOnce(time.Minute), Outlet: out})
	accept(t, p, from("e1", "ana", "ask"))
	out.waitFor(t, 1)
	accept(t, p, from("e2", "bea", "/clear"))
	if sent := out.waitFor(t, 3); sent[1] != "c1:cancelled" || sent[2] != "c1:turn for bea: /clear" {
		t.Fatalf("sent = %q", sent)
	}
	accept(t, p, from("e3", "ana", "ask"))
	out.waitFor(t, 4)
	accept(t, p, from("e4", "ana", "/cancel"))
	if sent := out.waitFor(t, 5); sent[4] != "c1:cancelled" {
		t.Fatalf("sent = %q", sent)
	}

	// A store of its own: on the first one, the first pipeline may still
	// be finishing /cancel's event, which this one would take over.
	db2, _ := openStore(t)
	out2 := &outlet{}
	p2 := newPipeline(t, bridge.PipelineConfig{Inbox: db2, Handler: askOnce(50 * time.Millisecond), Outlet: out2})
	accept(t, p2, from("f1", "ana", "ask"))
	if sent := out2.waitFor(t, 2); sent[1] != "c1:expired" {
		t.Fatalf("sent = %q", sent)
	}
}
