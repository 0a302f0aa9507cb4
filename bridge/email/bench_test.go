package email

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/email/emailtest"
	"loadout/chat"
	"loadout/store/storetest"
)

// BenchmarkMessage delivers one authenticated message into the mailbox
// and waits for its answer at the SMTP server: the IMAP server telling
// the channel in IDLE, the fetch, the parse and the authentication
// check, the inbox, the turn, \Seen, and the reply composed (text and
// HTML) and submitted over SMTP. cpu-ms/msg is the process's CPU time
// (user and system, the in-process mail servers included) per message,
// to set beside the other channels'.
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkMessage ./bridge/email/
func BenchmarkMessage(b *testing.B) {
	srv := emailtest.New(b, emailtest.Options{})
	env := storetest.NewEnv(b, storetest.Options{})
	engine := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, bridgetest.Instant{}, env.Store, env.Registry)
	cfg := testConfig(srv)
	cfg.PerSenderHour = 1 << 30
	cfg.Delivery = bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	a, err := New(cfg, bridge.NewRouter(engine, "loadout"), env.Store)
	if err != nil {
		b.Fatal(err)
	}
	running(b, a)
	start := bridgetest.ProcessCPU()
	b.ResetTimer()
	for i := range b.N {
		srv.Deliver(b, from(ana, emailtest.Mail{Subject: "Re: bench", References: []string{"bench@example.org"}, Text: "hello there"}))
		for srv.Count() < i+1 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((bridgetest.ProcessCPU()-start).Microseconds())/float64(b.N)/1000, "cpu-ms/msg")
}
