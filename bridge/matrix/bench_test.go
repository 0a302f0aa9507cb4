package matrix

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/matrix/matrixtest"
	"loadout/chat"
	"loadout/store/storetest"
	"loadout/tools"
)

// answered signals each message the bot sends.
type answered struct {
	base http.RoundTripper
	sent chan struct{}
}

func (a answered) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if err == nil && isSend(r) {
		a.sent <- struct{}{}
	}
	return resp, err
}

// BenchmarkMessage sends one message at a time to the bot through
// Dendrite and waits for its answer: the sync that brings it, the inbox,
// the turn (an instant model), the answer stored, sent and recorded. Its
// cpu-ms/msg is this process's CPU time (user and system) per message:
// the bot's, and the sender's one request (and, encrypted, its
// encryption); Dendrite runs in a process of its own. Run:
//
//	go test -tags sqlite_fts5,goolm -run '^$' -bench Message -benchtime 200x ./bridge/matrix/
func BenchmarkMessage(b *testing.B) {
	for _, encrypted := range []bool{false, true} {
		name := "unencrypted"
		if encrypted {
			name = "encrypted"
		}
		b.Run(name, func(b *testing.B) {
			if encrypted && !matrixtest.Encryption() {
				b.Skip("encryption needs the goolm build tag")
			}
			benchMessage(b, encrypted)
		})
	}
}

func benchMessage(b *testing.B, encrypted bool) {
	hs := homeserver.Get(b)
	bot := hs.Account(b, "loadout", botPassword)
	ana := hs.Person(b, "ana", encrypted)
	room := ana.Room(b, encrypted, id.UserID(bot))
	env := storetest.NewEnv(b, storetest.Options{})
	reg := tools.NewRegistry()
	reg.Add(tools.LoadGroup(reg))
	engine := chat.New(chat.Config{Logger: quietLog()}, bridgetest.Instant{}, env.Store, reg)
	sent := make(chan struct{}, 16)
	sqlDB, _ := env.Store.Gorm().DB()
	a, err := New(Config{HomeserverURL: hs.URL, UserID: bot, Password: botPassword, PickleKey: botPickleKey, AllowedUsers: []string{string(ana.ID())},
		Delivery: bridge.Delivery{Logger: quietLog(), HTTPClient: &http.Client{Transport: answered{http.DefaultTransport, sent}}}},
		bridge.NewRouter(engine, "loadout"), env.Store, bridge.SQL{DB: sqlDB, Dialect: env.Store.Gorm().Dialector.Name()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	matrixtest.Eventually(b, "the bot connected", a.Ready)
	ana.WaitJoined(b, room, id.UserID(bot))
	say := func(i int) {
		ana.Say(b, room, &event.MessageEventContent{MsgType: event.MsgText, Body: fmt.Sprintf("message %d", i)})
		select {
		case <-sent:
		case <-time.After(30 * time.Second):
			b.Fatal("no answer")
		}
	}
	say(-1) // keys shared, sessions open
	b.ReportAllocs()
	before := bridgetest.ProcessCPU()
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		say(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(bridgetest.ProcessCPU()-before)/float64(b.N)/1e6, "cpu-ms/msg")
	b.ReportMetric(float64(time.Since(start))/float64(b.N)/1e6, "ms/msg")
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
