package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/chat/chattest"
)

// Every search test runs three times: on FTS5 when the build has it, on
// the scan this store falls back to without it, and by words and
// meaning (a fake embeddings server); on PostgreSQL, on its tsvector
// index, with and without meaning.
func bothWays(t *testing.T, test func(t *testing.T, db *DB)) {
	t.Run("meaning", func(t *testing.T) {
		db := open(t)
		withMeaning(t, db, chattest.NewEmbeddingsServer(t), "fake-embed")
		test(t, db)
	})
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
		found, err := db.SearchMemories(ctx, ana, "How does she like coffee?", 10)
		mine := found.Memories
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
		if got, _ := db.SearchMemories(ctx, bea, "coffee", 10); len(got.Memories) != 0 {
			t.Errorf("a forgotten memory is still found: %+v", got)
		}
		if got, err := db.SearchMemories(ctx, ana, `"* OR NEAR( coffee`, 10); err != nil || len(got.Memories) != 1 {
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
		found, err := db.SearchHistory(ctx, "telegram:1", "what did we decide about the budget", 10)
		hits := found.Hits
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
	if found, err := db.SearchHistory(ctx, "c", "invoice", 5); err != nil || len(found.Hits) != 1 {
		t.Fatalf("after migration: %+v %v", found, err)
	}
}

// ftsOnly opens a SQLite store with FTS5 or skips the test.
func ftsOnly(t *testing.T) *DB {
	t.Helper()
	if os.Getenv(TestDSNVar) != "" {
		t.Skip("SQLite's FTS5 index only")
	}
	db := open(t)
	if !db.fts {
		t.Skip("this build has no FTS5 (build with -tags sqlite_fts5)")
	}
	return db
}

// indexed is how many messages the full-text index holds.
func indexed(t *testing.T, db *DB) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm().Raw("SELECT count(*) FROM messages_fts_docsize").Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// soundIndex fails the test unless FTS5 finds its index consistent with
// the messages.
func soundIndex(t *testing.T, db *DB) {
	t.Helper()
	if err := db.Gorm().Exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)").Error; err != nil {
		t.Fatalf("the history index is corrupt: %v", err)
	}
}

// Messages are indexed in batches, not one write at a time; a search
// first indexes what is waiting, so it finds a message at once.
func TestHistoryIndexIsBuiltInBatches(t *testing.T) {
	db := ftsOnly(t)
	ctx := context.Background()
	s, _ := db.OpenSession(ctx, "c")
	say := func(text string) {
		t.Helper()
		if err := db.Append(ctx, s.ID, []chat.Message{{Role: chat.RoleUser, Text: text}}, chat.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	say("the invoice from March")
	say("lunch on Friday")
	if n := indexed(t, db); n != 0 {
		t.Errorf("indexed at once: %d messages", n)
	}
	found, err := db.SearchHistory(ctx, "c", "invoice", 5)
	hits := found.Hits
	if err != nil || len(hits) != 1 {
		t.Fatalf("search: %+v %v", hits, err)
	}
	if n := indexed(t, db); n != 2 {
		t.Errorf("after a search %d messages are indexed, want 2", n)
	}
	for i := range ftsBatch {
		say(fmt.Sprintf("note %d", i))
	}
	if n := indexed(t, db); n < ftsBatch {
		t.Errorf("after %d more messages without a search only %d are indexed", ftsBatch, n)
	}
	soundIndex(t, db)
	if found, err := db.SearchHistory(ctx, "c", "note", 100); err != nil || len(found.Hits) != ftsBatch {
		t.Errorf("search found %d notes (%v), want %d", len(found.Hits), err, ftsBatch)
	}
}

// Deleting a message the index has not taken in yet leaves the index
// sound: an external-content FTS5 index must never be told to forget a
// row it does not hold.
func TestDeletingAnUnindexedMessageKeepsTheIndexSound(t *testing.T) {
	db := ftsOnly(t)
	ctx := context.Background()
	s, err := db.OpenSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	say := func(role chat.Role, text string) {
		t.Helper()
		if err := db.Append(ctx, s.ID, []chat.Message{{Role: role, Text: text}}, chat.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(text string) {
		t.Helper()
		res := db.Gorm().Exec("DELETE FROM messages WHERE text = ?", text)
		if res.Error != nil || res.RowsAffected != 1 {
			t.Fatalf("delete %q: %d rows, %v", text, res.RowsAffected, res.Error)
		}
	}
	say(chat.RoleUser, "the budget for March")
	if _, err := db.SearchHistory(ctx, "c", "budget", 5); err != nil {
		t.Fatal(err)
	}
	say(chat.RoleUser, "the budget for April")
	del("the budget for April")
	say(chat.RoleAssistant, "the budget for May")
	del("the budget for March")
	found, err := db.SearchHistory(ctx, "c", "budget", 5)
	hits := found.Hits
	if err != nil || len(hits) != 1 || !strings.Contains(hits[0].Snippet, "May") {
		t.Fatalf("hits = %+v %v", hits, err)
	}
	soundIndex(t, db)
}

// A database whose index was kept by a trigger on every insert (as older
// builds made it) loses the trigger and keeps its index: nothing is
// indexed twice.
func TestIndexTriggerOfOlderBuildsIsReplaced(t *testing.T) {
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
	g := db.Gorm()
	// As an older build left it: every insert indexed by a trigger.
	for _, q := range []string{
		"DROP TABLE search_marks",
		`DROP TRIGGER messages_fts_ad`,
		`CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages WHEN new.role IN ('user', 'assistant') AND new.text <> '' BEGIN
			INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text); END`,
		`CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN old.role IN ('user', 'assistant') AND old.text <> '' BEGIN
			INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text); END`,
		"PRAGMA user_version = 1",
	} {
		if err := g.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Append(ctx, s.ID, []chat.Message{{Role: chat.RoleUser, Text: "the invoice from March"}}, chat.Usage{})
	db.Close()
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var triggers int64
	db.Gorm().Raw("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_ai'").Scan(&triggers)
	if triggers != 0 {
		t.Error("the per-insert trigger is still there")
	}
	db.Append(ctx, s.ID, []chat.Message{{Role: chat.RoleUser, Text: "another invoice"}}, chat.Usage{})
	found, err := db.SearchHistory(ctx, "c", "invoice", 5)
	hits := found.Hits
	if err != nil || len(hits) != 2 {
		t.Fatalf("hits = %+v %v", hits, err)
	}
	if n := indexed(t, db); n != 2 {
		t.Errorf("%d messages indexed, want 2", n)
	}
	soundIndex(t, db)
}
