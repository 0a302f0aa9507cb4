package telegram

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// BenchmarkFirstTextVisible measures, for a streamed answer, the time from
// the model writing its first piece to that text reaching Telegram (the
// fake Bot API recording the draft message): the engine, the adapter's
// stream reading, the pipeline's drafter and one Bot API call.
//
//	go test -run '^$' -bench FirstTextVisible ./bridge/telegram/
func BenchmarkFirstTextVisible(b *testing.B) {
	env := storetest.NewEnv(b, storetest.Options{})
	tg := telegramtest.New(b)
	a := New(Config{Token: telegramtest.Token, APIEndpoint: tg.Endpoint(), AllowedUsers: []string{"42"}, Stream: true,
		SendPerSecond: -1, SendPerChatSecond: -1, Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}},
		bridge.NewRouter(env.Engine, "loadout"), env.Store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		env.Model.Push(chattest.Step{Chunks: []string{"First words ", "and the rest."}, ChunkDelay: 50 * time.Millisecond})
		tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "hi"})
		tg.WaitFor(b, "the answer", func() bool {
			s := tg.Sent()
			return len(s) == i+1 && strings.HasPrefix(s[i].Text, "First words and the rest.")
		})
		shown, firsts := tg.Sent()[i].At, env.Model.FirstPieces()
		total += shown.Sub(firsts[len(firsts)-1])
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "first-visible-ms")
}
