//go:build cgo

package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"loadout/chat"
)

// Found by a flaky test: eight goroutines writing through the pool's two
// connections failed now and then with "database is locked" after
// SQLite's ten-second busy timeout. SQLite's lock is not queued: the
// connection that found it taken sleeps and asks again, and can find it
// taken at every try. Writers of one process now queue before they ask,
// so they never meet SQLite's lock: with the busy timeout at zero, where
// a writer that meets it fails at once, none fails.
func TestWritersOfOneProcessNeverMeetSQLitesLock(t *testing.T) {
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 0
	db, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := writeTurns(ctx, db, 8, 20); err != nil {
		t.Fatalf("a writer met SQLite's lock: %v", err)
	}
	// Reservations, whose transactions read before they write.
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				err = db.Reserve(ctx, "telegram:1", "telegram:1", "2026-11-29", "2026-11-01", func(chat.Spent) (chat.Spend, error) {
					return chat.Spend{PromptTokens: 1}, nil
				})
			}
			errs <- err
			_ = w
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("a reservation met SQLite's lock: %v", err)
		}
	}
}
