package telegram

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat"
	"loadout/store/storetest"
)

// BenchmarkMessage sends one private message through long polling and
// waits for its answer at the fake Bot API: the update read, the channel
// judging it, the inbox, the turn, the answer sent through the Bot API
// client. cpu-ms/msg is the process's CPU time (user and system, the
// in-process fake included) per message, measured as Discord's and
// Matrix's BenchmarkMessage measure theirs.
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkMessage ./bridge/telegram/
func BenchmarkMessage(b *testing.B) {
	benchMessage(b, chat.Config{})
}

// BenchmarkMessageCapped is BenchmarkMessage with spend caps and prices
// set: each message reads the person's and the chat's spend before the
// model call and adds the call's after it.
func BenchmarkMessageCapped(b *testing.B) {
	benchMessage(b, chat.Config{
		Limits: chat.Limits{DailyTokensPerPerson: 1 << 40, DailyTokensPerChat: 1 << 40, MonthlyTokensPerPerson: 1 << 40, DailyCostPerPerson: 1e9},
		Prices: map[string]chat.Price{"gpt-4o-mini": {Input: 0.15, Output: 0.6}},
	})
}

func benchMessage(b *testing.B, cfg chat.Config) {
	tg := telegramtest.New(b)
	env := storetest.NewEnv(b, storetest.Options{})
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.Limits.Capped() {
		cfg.Ledger = env.Store
	}
	engine := chat.New(cfg, bridgetest.Instant{}, env.Store, env.Registry)
	a := New(Config{Token: telegramtest.Token, APIEndpoint: tg.Endpoint(), AllowedUsers: []string{"42"},
		SendPerSecond: -1, SendPerChatSecond: -1, SendPerGroupMinute: -1,
		Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}, bridge.NewRouter(engine, "loadout"), env.Store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	// The first message warms the channel up (the bot's identity, the
	// first poll).
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "hello"})
	tg.WaitSent(b, 1)
	start := bridgetest.ProcessCPU()
	b.ResetTimer()
	for i := range b.N {
		tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "hello there"})
		for len(tg.Sent()) < i+2 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((bridgetest.ProcessCPU()-start).Microseconds())/float64(b.N)/1000, "cpu-ms/msg")
}
