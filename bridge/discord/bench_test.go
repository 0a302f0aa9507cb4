package discord

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/discord/discordtest"
	"loadout/chat"
	"loadout/store/storetest"
)

// BenchmarkMessage sends one direct message through the gateway and
// waits for its answer at the fake Discord: discordgo reading the event,
// the channel judging it, the inbox, the turn, the answer posted through
// discordgo's REST client. cpu-ms/msg is the process's CPU time (user
// and system, the in-process fake Discord included) per message, to set
// beside Telegram's and Slack's.
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkMessage ./bridge/discord/
func BenchmarkMessage(b *testing.B) {
	dc := discordtest.New(b)
	env := storetest.NewEnv(b, storetest.Options{})
	engine := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, bridgetest.Instant{}, env.Store, env.Registry)
	a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID}, SendPerChannelSecond: -1,
		Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}, bridge.NewRouter(engine, "loadout"), env.Store)
	run(b, dc, a)
	dm := dc.DM(ana.ID)
	start := bridgetest.ProcessCPU()
	b.ResetTimer()
	for i := range b.N {
		dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "hello there"})
		for dc.Count(dm) < i+1 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((bridgetest.ProcessCPU()-start).Microseconds())/float64(b.N)/1000, "cpu-ms/msg")
}
