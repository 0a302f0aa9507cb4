package discord

import (
	"context"
	"testing"

	"loadout/store/storetest"
)

// The cursors an earlier version kept in one state move to the store's
// cursors, one per conversation, when first read; the state is emptied.
// Cursors only move forward, in the store as here.
func TestCursorsOfAnEarlierVersionMove(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	ctx := context.Background()
	legacy := `{"` + c1 + `":{"guild":"` + g1 + `","last":"1300000000000000001"},"955":{"last":"1300000000000000005"}}`
	if err := env.Store.SetState(ctx, legacyCursorsKey, legacy); err != nil {
		t.Fatal(err)
	}
	c := newCursors(env.Store)
	if err := c.load(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.get(c1); !ok || got.Guild != g1 || got.Last != "1300000000000000001" {
		t.Fatalf("%s's cursor %+v", c1, got)
	}
	if got, ok := c.get("955"); !ok || got.Guild != "" || got.Last != "1300000000000000005" {
		t.Fatalf("a direct message's cursor %+v", got)
	}
	if v, _ := env.Store.State(ctx, legacyCursorsKey); v != "" {
		t.Fatalf("the state stayed: %q", v)
	}
	stored, err := env.Store.Cursors(ctx, cursorScope)
	if err != nil || stored[g1+"/"+c1] != 1300000000000000001 || stored["@me/955"] != 1300000000000000005 {
		t.Fatalf("stored %v, %v", stored, err)
	}
	// Another process, behind, writes late: nothing moves back.
	late := newCursors(env.Store)
	late.m["955"] = cursor{Last: "1300000000000000002"}
	late.loaded = true
	if err := late.advance(ctx, "955", "", "1300000000000000003"); err != nil {
		t.Fatal(err)
	}
	c.reload()
	if err := c.load(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.get("955"); got.Last != "1300000000000000005" {
		t.Fatalf("moved back to %s", got.Last)
	}
}
