package discord

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/discord/discordtest"
	"loadout/store/storetest"
	"loadout/tools"
)

// dangerous is a destructive tool that counts its runs.
func dangerous(runs *atomic.Int32) func(*tools.Registry) error {
	return func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive for good.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}
}

// In a server, a press of Approve by anyone but the person asked is
// refused to them alone and decides nothing; the asker's press runs the
// call and the question shows what they chose, without its buttons.
func TestApprovalButtonsAnswerOnlyTheAsker(t *testing.T) {
	var runs atomic.Int32
	r := newRig(t, storetest.Options{Register: dangerous(&runs)}, nil)
	r.env.Model.Call("purge_archive", `{}`)
	r.env.Model.Text("The archive is gone.")
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "purge the archive", Mention: true})
	q := r.waitSent(c1, 1)[0]
	if len(q.Buttons) != 2 || !strings.HasPrefix(q.Buttons[0].Label, "Approve #") || !strings.Contains(q.Content, "Request #") {
		t.Fatalf("question %+v", q)
	}
	press := r.dc.Press(bea, g1, q.ID, q.Buttons[0].CustomID)
	r.dc.WaitFor(t, "bea's press answered", func() bool { return len(r.dc.Responses(press)) == 1 })
	if resp := r.dc.Responses(press)[0]; resp.Type != 4 || resp.Flags&64 == 0 || resp.Content != bridge.TextNotYours {
		t.Fatalf("bea's press was answered %+v", resp)
	}
	time.Sleep(100 * time.Millisecond)
	if runs.Load() != 0 || len(r.dc.Sent(c1)[0].Buttons) != 2 {
		t.Fatalf("bea's press decided: %d runs, question %+v", runs.Load(), r.dc.Sent(c1)[0])
	}
	press = r.dc.Press(ana, g1, q.ID, q.Buttons[0].CustomID)
	sent := r.waitSent(c1, 2)
	if runs.Load() != 1 || sent[1].Content != "The archive is gone." {
		t.Fatalf("after ana's press: %d runs, sent %q", runs.Load(), contents(sent))
	}
	if resp := r.dc.Responses(press); len(resp) != 1 || resp[0].Type != 7 {
		t.Fatalf("ana's press was answered %+v", resp)
	}
	if q := sent[0]; len(q.Buttons) != 0 || !strings.HasSuffix(q.Content, "You chose: Approve.") {
		t.Fatalf("the question now %+v", q)
	}
	// Pressed again, the request is over: the presser is told, nothing runs.
	again := r.dc.Press(ana, g1, q.ID, q.Buttons[0].CustomID)
	r.dc.WaitFor(t, "the late press answered", func() bool { return len(r.dc.Responses(again)) == 1 })
	if runs.Load() != 1 {
		t.Fatalf("%d runs after a second press", runs.Load())
	}
}

// The channel judges a press itself, by the person the button was made
// for, before it asks the engine: a press of a button made for ana, by
// bea, is refused to bea alone and decides nothing, even on a request
// of bea's own that the engine would let her answer.
func TestAButtonCountsOnlyForThePersonItWasMadeFor(t *testing.T) {
	var runs atomic.Int32
	r := newRig(t, storetest.Options{Register: dangerous(&runs)}, nil)
	r.env.Model.Call("purge_archive", `{}`)
	r.env.Model.Text("The archive is gone.")
	r.dc.Post(discordtest.Message{Author: bea, Guild: g1, Channel: c1, Content: "purge the archive", Mention: true})
	q := r.waitSent(c1, 1)[0]
	verb, id, owner := pressOf(q.Buttons[0].CustomID)
	if verb != pressApprove || owner != bea.ID {
		t.Fatalf("button %q", q.Buttons[0].CustomID)
	}
	press := r.dc.Press(bea, g1, q.ID, verb+":"+id+":"+ana.ID)
	r.dc.WaitFor(t, "the press answered", func() bool { return len(r.dc.Responses(press)) == 1 })
	if resp := r.dc.Responses(press)[0]; resp.Type != 4 || resp.Flags&64 == 0 || resp.Content != bridge.TextNotYours {
		t.Fatalf("a press of ana's button was answered %+v", resp)
	}
	time.Sleep(100 * time.Millisecond)
	if runs.Load() != 0 || len(r.dc.Sent(c1)) != 1 || len(r.dc.Sent(c1)[0].Buttons) != 2 {
		t.Fatalf("a press of ana's button decided: %d runs, sent %+v", runs.Load(), r.dc.Sent(c1))
	}
	// Her own button answers it.
	r.dc.Press(bea, g1, q.ID, q.Buttons[0].CustomID)
	if sent := r.waitSent(c1, 2); runs.Load() != 1 || sent[1].Content != "The archive is gone." {
		t.Fatalf("after bea's own press: %d runs, sent %q", runs.Load(), contents(sent))
	}
}
