package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loadout/chat"
)

// Every search test runs twice: on FTS5 when the build has it, and on
// the scan this store falls back to without it; on PostgreSQL, on its
// tsvector index.
func bothWays(t *testing.T, test func(t *testing.T, db *DB)) {
	if os.Getenv(TestDSNVar) != "" {
		t.Run("tsvector", func(t *testing.T) { test(t, open(t)) })
		return
	}
	t.Run("fts5", func(t *testing.T) {
		db := open(t)
		if !db.fts {
			t.Skip("this build has no FTS5 (build with -tags sqlite_fts5)")
		}
		test(t, db)
	})
	t.Run("scan", func(t *testing.T) {
		db := open(t)
		db.fts = false
		test(t, db)
	})
}

// Two people in one group chat each recall and find only their own
// memories, and cannot forget the other's.
func TestMemoriesBelongToTheirPerson(t *testing.T) {
	bothWays(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		ana, bea := "telegram:1", "telegram:2"
		db.SaveMemory(ctx, ana, "Ana drinks her coffee black")
		db.SaveMemory(ctx, ana, "Ana's daughter is called Rita")
		secret, _ := db.SaveMemory(ctx, bea, "Bea takes coffee with oat milk")
		mine, err := db.SearchMemories(ctx, ana, "How does she like coffee?", 10)
		if err != nil || len(mine) != 1 || !strings.Contains(mine[0].Text, "black") {
			t.Fatalf("Ana's search = %+v %v", mine, err)
		}
		if got, _ := db.RecentMemories(ctx, ana, 10); len(got) != 2 || got[0].Text != "Ana's daughter is called Rita" {
			t.Errorf("Ana's recall = %+v", got)
		}
		if ok, _ := db.ForgetMemory(ctx, ana, secret.ID); ok {
			t.Error("Ana forgot Bea's memory")
		}
		if n, _ := db.CountMemories(ctx, bea); n != 1 {
			t.Errorf("Bea has %d memories", n)
		}
		if ok, _ := db.ForgetMemory(ctx, bea, secret.ID); !ok {
			t.Error("Bea could not forget her own memory")
		}
		if got, _ := db.SearchMemories(ctx, bea, "coffee", 10); len(got) != 0 {
			t.Errorf("a forgotten memory is still found: %+v", got)
		}
		if got, err := db.SearchMemories(ctx, ana, `"* OR NEAR( coffee`, 10); err != nil || len(got) != 1 {
			t.Errorf("query syntax in the input: %+v %v", got, err)
		}
	})
}

// History search finds the chat's messages in closed sessions too, never
// another chat's, and not tool results.
func TestSearchHistory(t *testing.T) {
	bothWays(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		say := func(chatKey string, msgs ...chat.Message) {
			s, err := db.OpenSession(ctx, chatKey)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Append(ctx, s.ID, msgs, chat.Usage{}); err != nil {
				t.Fatal(err)
			}
		}
		say("telegram:1",
			chat.Message{Role: chat.RoleUser, Text: "Should we move the budget meeting?"},
			chat.Message{Role: chat.RoleAssistant, Text: "We decided to keep the budget meeting on Friday."})
		db.CloseSession(ctx, "telegram:1")
		say("telegram:1", chat.Message{Role: chat.RoleUser, Text: "hello again"},
			chat.Message{Role: chat.RoleTool, ToolCallID: "c", Text: "budget tool output"})
		say("telegram:2", chat.Message{Role: chat.RoleUser, Text: "my own budget secrets"})
		hits, err := db.SearchHistory(ctx, "telegram:1", "what did we decide about the budget", 10)
		if err != nil || len(hits) != 2 {
			t.Fatalf("hits = %+v %v", hits, err)
		}
		for _, h := range hits {
			if strings.Contains(h.Snippet, "secrets") || strings.Contains(h.Snippet, "tool output") || h.At.IsZero() {
				t.Errorf("hit %+v", h)
			}
		}
		if db.fts && !strings.Contains(hits[0].Snippet+hits[1].Snippet, "[budget]") {
			t.Errorf("snippets do not mark the words: %+v", hits)
		}
	})
}

// A database with messages from before search existed gets them indexed
// when it is migrated.
func TestHistoryIndexIsBackfilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !db.fts {
		db.Close()
		t.Skip("this build has no FTS5")
	}
	ctx := context.Background()
	s, _ := db.OpenSession(ctx, "c")
	db.Append(ctx, s.ID, []chat.Message{{Role: chat.RoleUser, Text: "the invoice from March"}}, chat.Usage{})
	// As an older build left it: no index, another schema stamp.
	db.Gorm().Exec("DROP TABLE messages_fts")
	db.Gorm().Exec("DROP TABLE memories_fts")
	db.Gorm().Exec("PRAGMA user_version = 1")
	db.Close()
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if hits, err := db.SearchHistory(ctx, "c", "invoice", 5); err != nil || len(hits) != 1 {
		t.Fatalf("after migration: %+v %v", hits, err)
	}
}
