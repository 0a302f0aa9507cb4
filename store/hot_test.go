package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat"
)

// The per-message statements are prepared once and kept, while turns of
// whatever size run at once (as many as the pipeline's workers) on the
// store's two connections: none waits for a connection while it holds
// the other one.
func TestHotStatementsKeptAndBounded(t *testing.T) {
	db := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := writeTurns(ctx, db, 8, 15); err != nil {
		t.Fatal(err)
	}
	if db.hot == nil {
		return // PostgreSQL: its driver keeps its statements
	}
	if n := len(db.hot.m); n == 0 || n > maxHot {
		t.Fatalf("%d statements kept, want 1 to %d", n, maxHot)
	}
	for _, q := range []string{updateCounters, insertMessages(2)} {
		if db.hot.m[q] == nil {
			t.Errorf("not kept: %.40s…", q)
		}
	}
}

// GiveBack drops the pages each kept connection cached, and the store
// reads the same afterwards.
func TestGiveBackDropsCachedPages(t *testing.T) {
	db := open(t)
	if db.hot == nil {
		t.Skip("PostgreSQL: no SQLite page cache in this process")
	}
	ctx := context.Background()
	s, err := db.OpenSession(ctx, "chat")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]chat.Message, 400)
	for i := range msgs {
		msgs[i] = chat.Message{Role: chat.RoleUser, Text: fmt.Sprintf("message %d %0400d", i, i)}
	}
	if err := db.Append(ctx, s.ID, msgs, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	// Both connections read the history, so both cache its pages.
	var wg sync.WaitGroup
	for range maxConns {
		wg.Go(func() {
			if _, err := db.Recent(ctx, s.ID, 400); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	before := sqliteMemory()
	db.GiveBack(ctx)
	after := sqliteMemory()
	if after >= before-100_000 {
		t.Errorf("SQLite holds %d bytes after GiveBack, %d before", after, before)
	}
	got, err := db.Recent(ctx, s.ID, 400)
	if err != nil || len(got) != len(msgs) || got[399].Text != msgs[399].Text {
		t.Fatalf("history after GiveBack: %d messages, %v", len(got), err)
	}
	t.Logf("SQLite held %d bytes, %d after GiveBack", before, after)
}

// writeTurns writes what writers chats' turns write to the store at
// once, turns of them each, and returns the first error.
func writeTurns(ctx context.Context, db *DB, writers, turns int) error {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprint("chat", w)
			for i := range turns {
				it, _, err := db.Accept(ctx, "telegram", bridge.Pending{ID: fmt.Sprint(w, ":", i), Inbound: chat.Inbound{ChatKey: key}}, nil)
				if err == nil {
					_, err = db.Begin(ctx, it.Seq, false)
				}
				var s chat.Session
				if err == nil {
					s, err = db.OpenSession(ctx, key)
				}
				if err == nil {
					_, err = db.LoadedGroups(ctx, s.ID)
				}
				if err == nil {
					// Turns of 1 to 60 messages: more shapes of INSERT
					// than the store keeps.
					msgs := make([]chat.Message, 1+(w*turns+i)%60)
					for j := range msgs {
						msgs[j] = chat.Message{Role: chat.RoleUser, Text: "hi"}
					}
					err = db.Append(ctx, s.ID, msgs, chat.Usage{})
				}
				if err == nil {
					err = db.Answer(ctx, it.Seq, bridge.Answer{Parts: []string{"ok"}})
				}
				if err == nil {
					err = db.Finish(ctx, it.Seq, bridge.StateDone)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
