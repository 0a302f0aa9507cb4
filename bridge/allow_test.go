package bridge_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"loadout/bridge"
	"loadout/bridge/console"
	"loadout/store/storetest"
)

// counted counts the writes to a store's states.
type counted struct {
	bridge.States
	writes atomic.Int32
}

func (c *counted) SetState(ctx context.Context, key, value string) error {
	c.writes.Add(1)
	return c.States.SetState(ctx, key, value)
}

// A person let in by their username is known afterwards by their id
// alone (their web session knows nothing else): the list keeps, in the
// channel's store, the username it let them in by, so a restart with a
// list that no longer names it does not let them in.
func TestAllowlistJudgesByIdAPersonLetInByUsername(t *testing.T) {
	ctx := context.Background()
	st := &counted{States: storetest.NewEnv(t, storetest.Options{}).Store}
	a := bridge.NewAllowlist([]string{"42", "@Ana"}).Keep(st, "telegram")
	admits := func(a *bridge.Allowlist, id string) bool {
		t.Helper()
		ok, err := a.Admits(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !admits(a, "42") || admits(a, "7") || admits(a, "") {
		t.Fatal("before anyone wrote")
	}
	for range 3 {
		if ok, err := a.Let(ctx, "7", "@ANA"); !ok || err != nil {
			t.Fatalf("Let: %v %v", ok, err)
		}
	}
	if ok, _ := a.Let(ctx, "8", "bob"); ok || admits(a, "8") {
		t.Fatal("bob is let in")
	}
	if ok, _ := a.Let(ctx, "42", ""); !ok {
		t.Fatal("42 is not let in")
	}
	if !admits(a, "7") || st.writes.Load() != 1 {
		t.Fatalf("ana: admitted %v after %d writes, want 1", admits(a, "7"), st.writes.Load())
	}
	// A restart with another list: the username kept is judged by it.
	if admits(bridge.NewAllowlist([]string{"42", "@bea"}).Keep(st, "telegram"), "7") {
		t.Fatal("ana is let in by a list without her")
	}
	if !admits(bridge.NewAllowlist([]string{"@ana"}).Keep(st, "telegram"), "7") {
		t.Fatal("ana is not let in after a restart")
	}
	if admits(bridge.NewAllowlist([]string{"@ana"}).Keep(st, "discord"), "7") {
		t.Fatal("another channel's 7 is let in by telegram's record")
	}
	// Without Keep, only ids are known.
	plain := bridge.NewAllowlist([]string{"42", "@ana"})
	if ok, _ := plain.Let(ctx, "7", "ana"); !ok || admits(plain, "7") || !admits(plain, "42") {
		t.Fatal("a list without a store")
	}
}

// The hub asks the channel a person's key names; a person of a channel
// that does not run here is not let in.
func TestHubAdmitsThroughTheChannelOfTheKey(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	var hub bridge.Hub
	hub.Add(console.New(console.Config{In: strings.NewReader(""), Out: new(strings.Builder)}, bridge.NewRouter(env.Engine, "loadout"), env.Store), nil)
	for user, want := range map[string]bool{"console:local": true, "console:someone": false, "telegram:42": false, "ui:operator": false} {
		if ok, err := hub.Admits(context.Background(), user); ok != want || err != nil {
			t.Errorf("%s: %v %v, want %v", user, ok, err, want)
		}
	}
}
