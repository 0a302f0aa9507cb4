package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/matrix/matrixtest"
	"loadout/config"
	"loadout/store/storetest"
)

// matrix.pickle_key is checked: a short one is refused, and a build
// with encryption requires one; a start without it stops with an error
// naming it.
func TestPickleKeyIsRequired(t *testing.T) {
	check := func(c Config) string {
		var ch config.Checker
		ch.Section = "matrix"
		c.Check(&ch)
		return fmt.Sprint(errors.Join(ch.Errors()...))
	}
	base := Config{Enabled: true, HomeserverURL: "https://matrix.example.org", UserID: "@loadout:example.org", Password: "pw"}
	short := base
	short.PickleKey = "too short"
	if got := check(short); !strings.Contains(got, "matrix.pickle_key: must be at least 32 characters") {
		t.Fatalf("a short key: %q", got)
	}
	good := base
	good.PickleKey = botPickleKey
	if got := check(good); strings.Contains(got, "pickle_key") {
		t.Fatalf("a good key: %q", got)
	}
	if got := check(base); strings.Contains(got, "matrix.pickle_key: is required") != matrixtest.Encryption() {
		t.Fatalf("no key, encryption %v: %q", matrixtest.Encryption(), got)
	}
	if !matrixtest.Encryption() {
		return
	}
	w := newWorld(t, false)
	env := storetest.NewEnv(t, storetest.Options{})
	cfg := w.config(bridge.Delivery{})
	cfg.PickleKey = ""
	_, _, done := w.run(t, env, cfg)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "matrix.pickle_key is required") {
			t.Fatalf("Run = %v, want an error naming matrix.pickle_key", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run went on without matrix.pickle_key")
	}
}

// The encryption state an earlier version kept under a pickle key of
// its own, made at its first start and stored in the database beside
// it, is moved to matrix.pickle_key at the first start with one: the
// bot still reads the room keys it had, and the database no longer
// holds a key. A key that opens nothing stops the start with an error
// naming matrix.pickle_key.
func TestPickleKeyOfAnEarlierVersionIsMoved(t *testing.T) {
	if !matrixtest.Encryption() {
		t.Skip("end-to-end encryption needs the goolm build tag (go test -tags sqlite_fts5,goolm)")
	}
	w := newWorld(t, true)
	env := storetest.NewEnv(t, storetest.Options{})
	ctx := context.Background()
	// What an earlier version made: 32 random bytes in base64, used as
	// they are written.
	const earlier = "q3Jt0cVh2pY8kzB1wXn5mLdE7sRfGaT9uIoPjKlZxCv"
	cfg := w.config(bridge.Delivery{})
	cfg.PickleKey = earlier
	_, stop := w.start(t, env, cfg)
	ana, room := w.people[0], w.rooms[0]
	env.Model.Text("first")
	w.say(t, 0, "one")
	waitTexts(t, ana, room, w.bot, 1)
	stop()
	if err := env.Store.SetState(ctx, statePickle, earlier); err != nil {
		t.Fatal(err)
	}

	env2 := storetest.NewEnv(t, storetest.Options{DBPath: env.DBPath, Model: env.Model})
	cfg.PickleKey = botPickleKey
	_, stop2 := w.start(t, env2, cfg)
	if kept, _ := env2.Store.State(ctx, statePickle); kept != "" {
		t.Fatalf("the database still holds a pickle key: %q", kept)
	}
	// Ana's message comes under the room key the bot received before,
	// now read with matrix.pickle_key.
	env.Model.Text("second")
	w.say(t, 0, "two")
	if got := waitTexts(t, ana, room, w.bot, 2); got[1] != "second" {
		t.Fatalf("answers %q", got)
	}
	stop2()

	env3 := storetest.NewEnv(t, storetest.Options{DBPath: env.DBPath, Model: env.Model})
	cfg.PickleKey = "not-the-key-the-state-is-kept-under"
	_, _, done := w.run(t, env3, cfg)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "matrix.pickle_key does not open") {
			t.Fatalf("Run = %v, want an error naming matrix.pickle_key", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run went on with a key that opens nothing")
	}
}
