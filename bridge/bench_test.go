package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"loadout/bridge"
	"loadout/chat"
	"loadout/store"
	"loadout/tools"
)

// instantModel answers at once, so the benchmark measures delivery, the
// engine and the store, not a network.
type instantModel struct{}

func (instantModel) Complete(context.Context, chat.Request) (chat.Response, error) {
	return chat.Response{Text: "ok|done", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

// BenchmarkDeliver sends one message through the whole pipeline and waits
// for it: stored in the inbox, the turn run by the engine, the two-part
// answer stored, each part sent and recorded, the event marked done. It
// spreads messages over chats so the workers run concurrently. Run:
//
//	go test -run '^$' -bench BenchmarkDeliver -benchmem ./bridge/
func BenchmarkDeliver(b *testing.B) {
	for _, chats := range []int{1, 64} {
		b.Run(fmt.Sprintf("chats=%d", chats), func(b *testing.B) {
			db, err := store.Open(filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			reg := tools.NewRegistry()
			if err := reg.Add(tools.LoadGroup(reg)); err != nil {
				b.Fatal(err)
			}
			engine := chat.New(chat.Config{Logger: quiet()}, instantModel{}, db, reg)
			out := &outlet{}
			p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "bench", Inbox: db, Outlet: out,
				Handler: bridge.NewRouter(engine, "loadout"), Logger: quiet()})
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer p.Stop()
			b.ReportAllocs()
			b.ResetTimer()
			var n int
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					out.mu.Lock()
					n++
					id := n
					out.sent = out.sent[:0]
					out.mu.Unlock()
					pend := pending(fmt.Sprint(id), fmt.Sprintf("chat%d", id%chats), "hello there")
					if err := p.Deliver(context.Background(), pend); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkJournalWindow measures, on SQLite, the window in which a
// part the platform took can be sent again after a kill: the time from
// the platform's answer until the journal has kept it. A file journal
// keeps it with one write(2) (the inbox's record follows, outside the
// window); a journal in the store keeps it with the inbox's own update.
// Where one process serves the store, the file is the narrower window;
// the store is the journal only where processes share it.
//
//	go test -tags sqlite_fts5 -run '^$' -bench JournalWindow ./bridge/
func BenchmarkJournalWindow(b *testing.B) {
	ctx := context.Background()
	for _, kind := range []string{"file", "store"} {
		b.Run(kind, func(b *testing.B) {
			dir := b.TempDir()
			db, err := store.Open(filepath.Join(dir, "loadout.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var j bridge.Journal = bridge.InboxJournal(db)
			if kind == "file" {
				fj, err := bridge.OpenJournal(filepath.Join(dir, "sent.journal"))
				if err != nil {
					b.Fatal(err)
				}
				defer fj.Close()
				j = fj
			}
			it, _, err := db.Accept(ctx, "bench", bridge.Pending{ID: "ev", Inbound: chat.Inbound{ChatKey: "A"}}, []string{"x"})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := j.Sent(ctx, it.Seq, i+1, false); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				j.Recorded(it.Seq)
				b.StartTimer()
			}
		})
	}
}
