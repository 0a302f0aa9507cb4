package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	"loadout/bridge/triggers"
	"loadout/chat"
)

// A person's triggers are theirs: a name is one trigger's, another person
// neither lists nor removes it, and a trigger event keeps its taint and
// groups in the inbox across a reopen.
func TestTriggersArePeoplesOwn(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	ana := triggers.Trigger{Name: "ci", Secret: "lth_0123", Chat: "telegram:1", User: "telegram:1", Prompt: "say", Groups: []string{"web"}}
	if err := db.SaveTrigger(ctx, ana); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveTrigger(ctx, triggers.Trigger{Name: "ci", Secret: "x", Chat: "telegram:2", User: "telegram:2", Prompt: "p"}); !errors.Is(err, triggers.ErrTaken) {
		t.Fatalf("a taken name: %v", err)
	}
	if got, err := db.Trigger(ctx, "ci"); err != nil || got.Secret != "lth_0123" || !slices.Equal(got.Groups, []string{"web"}) {
		t.Fatalf("Trigger = %+v, %v", got, err)
	}
	if _, err := db.Trigger(ctx, "nope"); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("an unknown trigger: %v", err)
	}
	if mine, _ := db.Triggers(ctx, "telegram:2"); len(mine) != 0 {
		t.Fatalf("another person lists %+v", mine)
	}
	if ok, err := db.RemoveTrigger(ctx, "telegram:2", "ci"); ok || err != nil {
		t.Fatalf("another person removed it: %v, %v", ok, err)
	}
	if ok, err := db.RemoveTrigger(ctx, "telegram:1", "ci"); !ok || err != nil {
		t.Fatalf("its person could not remove it: %v, %v", ok, err)
	}

	p := pend("trigger:ci:id:1", "telegram:1", "say\n\nbody")
	p.Inbound.Tainted, p.Inbound.Groups = true, []string{"web"}
	if _, _, err := db.Accept(ctx, "telegram", p, nil); err != nil {
		t.Fatal(err)
	}
	items, err := db.Unfinished(ctx, "telegram")
	if err != nil || len(items) != 1 || !items[0].Inbound.Tainted || !slices.Equal(items[0].Inbound.Groups, []string{"web"}) {
		t.Fatalf("read back %+v, %v", items, err)
	}
}
