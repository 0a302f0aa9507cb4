package store

import (
	"context"
	"path/filepath"
	"testing"

	"loadout/chat"
)

// BenchmarkSpend measures the two statements of the spend caps on the
// per-message path: the read before the model call (a month of a
// person's days in three chats, or the day alone when no cap is
// monthly), the charge after; and, to compare, the read of a chat's
// settings every message makes.
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkSpend ./store/
func BenchmarkSpend(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	// A month of a person's days in three chats, and a group's others.
	for d := 1; d <= 26; d++ {
		day := "2026-11-" + string(rune('0'+d/10)) + string(rune('0'+d%10))
		for _, c := range []string{"a", "b", "group"} {
			db.Charge(ctx, chat.Charge{UserKey: "ana", ChatKey: c, Day: day, Spend: chat.Spend{PromptTokens: 100}})
			db.Charge(ctx, chat.Charge{UserKey: "bea" + c, ChatKey: "group", Day: day, Spend: chat.Spend{PromptTokens: 100}})
		}
	}
	for _, c := range []struct{ name, user, chat, from string }{
		{"month", "ana", "group", "2026-11-01"}, // a monthly cap and a chat's cap
		{"day", "ana", "group", "2026-11-26"},   // daily caps on the person and the chat
		{"person-day", "ana", "", "2026-11-26"}, // a daily cap on the person alone
	} {
		b.Run("spent/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.Spent(ctx, c.user, c.chat, "2026-11-26", c.from); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("settings", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := db.ChatSettings(ctx, "group"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("charge", func(b *testing.B) {
		b.ReportAllocs()
		c := chat.Charge{UserKey: "ana", ChatKey: "group", Day: "2026-11-26", Spend: chat.Spend{PromptTokens: 100, CompletionTokens: 10, Cost: 0.001}}
		for b.Loop() {
			if err := db.Charge(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
