package discord

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/discord/discordtest"
	"loadout/chat"
	"loadout/store/storetest"
)

// instantModel answers at once, in process, so the benchmark measures
// the channel, the pipeline, the engine and the store.
type instantModel struct{}

func (instantModel) Complete(context.Context, chat.Request) (chat.Response, error) {
	return chat.Response{Text: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

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
	engine := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, instantModel{}, env.Store, env.Registry)
	a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID}, SendPerChannelSecond: -1,
		Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}, bridge.NewRouter(engine, "loadout"), env.Store)
	run(b, dc, a)
	dm := dc.DM(ana.ID)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	b.ResetTimer()
	for i := range b.N {
		dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "hello there"})
		for dc.Count(dm) < i+1 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpu()-start).Microseconds())/float64(b.N)/1000, "cpu-ms/msg")
}
