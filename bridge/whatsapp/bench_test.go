package whatsapp

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/chat"
	"loadout/store/storetest"
)

// BenchmarkMessage posts one signed notification to the webhook and
// waits for its answer at the fake Graph API: the signature check, the
// decoding, the window's record, the inbox, the turn, the answer
// formatted and posted. cpu-ms/msg is the process's CPU time (user and
// system, the in-process fake included) per message, to set beside
// Telegram's, Discord's and Matrix's.
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkMessage ./bridge/whatsapp/
func BenchmarkMessage(b *testing.B) {
	wa := whatsapptest.New(b)
	env := storetest.NewEnv(b, storetest.Options{})
	engine := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, bridgetest.Instant{}, env.Store, env.Registry)
	cfg := testConfig(wa, bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// One person writes far faster than WhatsApp's pacing lets the bot
	// answer one person: the pacing is lifted to measure the work.
	cfg.unpaced = true
	a := New(cfg, bridge.NewRouter(engine, "loadout"), env.Store)
	run(b, wa, a)
	start := bridgetest.ProcessCPU()
	b.ResetTimer()
	for i := range b.N {
		wa.Send(b, whatsapptest.Message{From: ana, Text: "hello there"})
		for wa.Count(ana) < i+1 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((bridgetest.ProcessCPU()-start).Microseconds())/float64(b.N)/1000, "cpu-ms/msg")
}
