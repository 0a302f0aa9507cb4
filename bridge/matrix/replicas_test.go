package matrix

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	goopenai "github.com/sashabaranov/go-openai"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/matrix/matrixtest"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store/storetest"
)

// Two processes of the bot on one database (the SQLite file, or
// PostgreSQL with LOADOUT_TEST_DSN), each with its own client and
// encryption machinery in memory: the one holding the lease syncs and
// answers an encrypted message; it dies, and a second encrypted message
// is sent while it is dead; the other process takes the sync over once
// the lease expires, catches up from the stored sync token, and reads
// and answers it. So does it a first message from someone new, whose
// keys came under a one-time key the dead process published after the
// other had started: the account, as the dead one left it, is read
// from the database.
func TestAnotherProcessTakesTheSyncOver(t *testing.T) {
	if !matrixtest.Encryption() {
		t.Skip("end-to-end encryption needs the goolm build tag (go test -tags sqlite_fts5,goolm)")
	}
	w := newWorld(t, true)
	model := chattest.NewModelServer(t)
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		return chattest.Step{Text: "echo: " + req.Messages[len(req.Messages)-1].Content}
	}
	envA := storetest.NewEnv(t, storetest.Options{Model: model})
	envB := storetest.NewEnv(t, storetest.Options{DBPath: envA.DBPath, Model: model})
	const ttl = 500 * time.Millisecond
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	process := func(name string, s cluster.Store) Config {
		return w.config(bridge.Delivery{
			Exclusive: cluster.Exclusive(s, name, ttl, quiet),
			Claim:     cluster.Claim(s, name, ttl, quiet),
			Logger:    slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("process", name),
		})
	}
	_, stopA := w.start(t, envA, process("a", bridgetest.Dies{Store: envA.Store}))
	var refused atomic.Int32
	b, _, bEnded := w.run(t, envB, process("b", bridgetest.Refusals{Store: envB.Store, N: &refused}))
	// b has set up its encryption (reading the account) and waits for
	// the sync.
	matrixtest.Eventually(t, "b to be refused the sync", func() bool {
		select {
		case err := <-bEnded:
			t.Fatalf("b's Run returned: %v", err)
		default:
		}
		return refused.Load() >= 2
	})
	ana, bea := w.people[0], w.people[1]
	// Keys that did not reach the bot with a message never come.
	ana.RefuseKeyRequests(t)
	bea.RefuseKeyRequests(t)
	w.say(t, 0, "one")
	if got := waitTexts(t, ana, w.rooms[0], w.bot, 1); got[0] != "echo: one" {
		t.Fatalf("a answered %q", got)
	}

	// The one-time keys the account had when b read it are all claimed,
	// while a's uploads are held; then a publishes new ones.
	ctx := context.Background()
	token, _ := envA.Store.State(ctx, stateToken)
	device, _ := envA.Store.State(ctx, stateDevice)
	w.tr.holdKeys(true)
	for n := 0; ; n++ {
		res, err := bea.Client.ClaimKeys(ctx, &mautrix.ReqClaimKeys{
			OneTimeKeys: mautrix.OneTimeKeysRequest{w.bot: {id.DeviceID(device): id.KeyAlgorithmSignedCurve25519}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.OneTimeKeys[w.bot][id.DeviceID(device)]) == 0 {
			break
		}
		if n > 200 {
			t.Fatal("the bot's one-time keys never ran out")
		}
	}
	w.tr.holdKeys(false)
	bot, err := mautrix.NewClient(w.hs.URL, w.bot, token)
	if err != nil {
		t.Fatal(err)
	}
	bot.DeviceID, bot.Log = id.DeviceID(device), zerolog.Nop()
	matrixtest.Eventually(t, "a to publish new one-time keys", func() bool {
		res, err := bot.UploadKeys(ctx, &mautrix.ReqUploadKeys{})
		return err == nil && res.OneTimeKeyCounts.SignedCurve25519 >= 50
	})

	stopA() // and a's leases stay until they expire
	w.say(t, 0, "two")
	w.say(t, 1, "three") // Bea's device claims one of a's new keys
	matrixtest.Eventually(t, "b to answer", func() bool {
		return len(ana.Texts(w.rooms[0], w.bot)) >= 2 && len(bea.Texts(w.rooms[1], w.bot)) >= 1
	})
	time.Sleep(time.Second) // what would come twice has the time to
	if got := w.answers(0); !slices.Equal(got, []string{"echo: one", "echo: two"}) {
		t.Fatalf("Ana's answers %q", got)
	}
	if got := w.answers(1); !slices.Equal(got, []string{"echo: three"}) {
		t.Fatalf("Bea's answers %q", got)
	}
	if !b.Ready() {
		t.Fatal("b is not ready")
	}
	asked := map[string]int{}
	for _, r := range model.Requests() {
		asked[r.Messages[len(r.Messages)-1].Content]++
	}
	for _, m := range []string{"one", "two", "three"} {
		if asked[m] != 1 {
			t.Fatalf("the model was asked %q %d times", m, asked[m])
		}
	}
}

// Two processes of the bot send to one encrypted room in turn, each
// sharing a new room key with the person's device over the one olm
// session the bot device has with it: each process encrypts with the
// session as the other left it in the database, never with a copy of
// its own, so the person's device reads every message (a message key
// used twice would be refused, and the keys it carried never arrive).
func TestProcessesTakeTurnsWithTheEncryption(t *testing.T) {
	if !matrixtest.Encryption() {
		t.Skip("end-to-end encryption needs the goolm build tag (go test -tags sqlite_fts5,goolm)")
	}
	w := newWorld(t, true)
	envA := storetest.NewEnv(t, storetest.Options{})
	envB := storetest.NewEnv(t, storetest.Options{DBPath: envA.DBPath, Model: envA.Model})
	const ttl = 500 * time.Millisecond
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	process := func(name string, s cluster.Store) Config {
		return w.config(bridge.Delivery{
			Exclusive: cluster.Exclusive(s, name, ttl, quiet),
			Claim:     cluster.Claim(s, name, ttl, quiet),
			Logger:    slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("process", name),
		})
	}
	a, _ := w.start(t, envA, process("a", envA.Store))
	var refused atomic.Int32
	b, _, bEnded := w.run(t, envB, process("b", bridgetest.Refusals{Store: envB.Store, N: &refused}))
	matrixtest.Eventually(t, "b to be refused the sync", func() bool {
		select {
		case err := <-bEnded:
			t.Fatalf("b's Run returned: %v", err)
		default:
		}
		return refused.Load() >= 2
	})
	ana := w.people[0]
	// Ana's device asks for no keys it lacks: what did not reach it with
	// a message never comes.
	ana.KeepKeys(true)
	ctx := context.Background()
	key := chatKey(w.rooms[0], "")
	route, err := a.Route(key)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, p := range []*Adapter{b, a, b} {
		// A new room key each time, shared over the olm session.
		if err := envA.Store.Gorm().Exec("DELETE FROM crypto_megolm_outbound_session").Error; err != nil {
			t.Fatal(err)
		}
		text := []string{"from b", "from a", "from b again"}[i]
		if err := p.Pipeline().Notify(ctx, key, route, text); err != nil {
			t.Fatal(err)
		}
		want = append(want, text)
	}
	matrixtest.Eventually(t, "Ana to read the three", func() bool { return len(ana.Texts(w.rooms[0], w.bot)) >= 3 })
	if got := w.answers(0); !slices.Equal(got, want) {
		t.Fatalf("Ana read %q", got)
	}
}
