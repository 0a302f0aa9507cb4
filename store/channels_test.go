package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// twoHandles are two processes' handles on one database: a file, or a
// PostgreSQL schema with LOADOUT_TEST_DSN.
func twoHandles(t *testing.T) (*DB, *DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared.db")
	return openAt(t, path), openAt(t, path)
}

// Cursors only move forward, whichever handle writes: a late write of an
// older position changes nothing.
func TestCursorsOnlyMoveForward(t *testing.T) {
	one, two := twoHandles(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		db := one
		if i%2 == 1 {
			db = two
		}
		wg.Go(func() {
			if _, err := db.AdvanceCursor(ctx, "discord", "@me/1", int64(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if moved, err := one.AdvanceCursor(ctx, "discord", "@me/1", 7); moved || err != nil {
		t.Fatalf("moved back: %v %v", moved, err)
	}
	if moved, err := two.AdvanceCursor(ctx, "discord", "g/2", 5); !moved || err != nil {
		t.Fatalf("a new cursor: %v %v", moved, err)
	}
	got, err := one.Cursors(ctx, "discord")
	if err != nil || len(got) != 2 || got["@me/1"] != 39 || got["g/2"] != 5 {
		t.Fatalf("cursors %v, %v", got, err)
	}
	if other, err := two.Cursors(ctx, "email"); err != nil || len(other) != 0 {
		t.Fatalf("another scope's cursors: %v %v", other, err)
	}
}

// A limit counted from two handles at once lets exactly max through; an
// event counted before is let through again without counting twice; a
// refused one is not counted; and the count ends with the window.
func TestHitsAreCountedOnceAcrossHandles(t *testing.T) {
	one, two := twoHandles(t)
	ctx := context.Background()
	const max = 7
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range 30 {
		db := one
		if i%2 == 1 {
			db = two
		}
		wg.Go(func() {
			ok, err := db.Hit(ctx, "email:ana@example.org", fmt.Sprintf("m%d", i), max, time.Hour)
			if err != nil {
				t.Error(err)
			}
			if ok {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != max {
		t.Fatalf("%d of 30 let through, want %d", n, max)
	}
	var counted []string
	if err := one.Gorm().Model(&rateHit{}).Where("key = ?", "email:ana@example.org").Pluck("ref", &counted).Error; err != nil {
		t.Fatal(err)
	}
	if len(counted) != max {
		t.Fatalf("%d counted", len(counted))
	}
	if ok, err := two.Hit(ctx, "email:ana@example.org", counted[0], max, time.Hour); !ok || err != nil {
		t.Fatalf("an event counted before: %v %v", ok, err)
	}
	if ok, _ := one.Hit(ctx, "email:bea@example.org", "m0", max, time.Hour); !ok {
		t.Fatal("another key was refused")
	}
	later := time.Now().Add(time.Hour + time.Second)
	two.now = func() time.Time { return later }
	if ok, err := two.Hit(ctx, "email:ana@example.org", "m99", max, time.Hour); !ok || err != nil {
		t.Fatalf("after the window: %v %v", ok, err)
	}
	var left int64
	two.Gorm().Model(&rateHit{}).Count(&left)
	if left != 1 {
		t.Fatalf("%d hits left after the window, want the new one", left)
	}
}

// Two handles holding messages for one chat at once, while a third
// takes them, lose none: each is either given with the take or held for
// the next one. The bound keeps the newest and counts the others.
func TestHeldMessagesLoseNothingAcrossHandles(t *testing.T) {
	one, two := twoHandles(t)
	ctx := context.Background()
	const chat, n = "whatsapp:15550001", 30
	var wg sync.WaitGroup
	for i := range n {
		db := one
		if i%2 == 1 {
			db = two
		}
		wg.Go(func() {
			if _, err := db.HoldMessage(ctx, chat, fmt.Sprintf("part %02d", i), 100); err != nil {
				t.Error(err)
			}
		})
		if i == n/2 {
			wg.Go(func() {
				if _, _, err := two.TakeHeldMessages(ctx, chat, "wamid.first"); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	first, _, err := one.TakeHeldMessages(ctx, chat, "wamid.first")
	if err != nil {
		t.Fatal(err)
	}
	if err := one.ForgetHeldMessages(ctx, chat, "wamid.first"); err != nil {
		t.Fatal(err)
	}
	second, dropped, err := two.TakeHeldMessages(ctx, chat, "wamid.second")
	if err != nil || dropped != 0 {
		t.Fatalf("second take: %v, %d dropped", err, dropped)
	}
	all := append(slices.Clone(first), second...)
	sort.Strings(all)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("part %02d", i))
	}
	if !slices.Equal(all, want) {
		t.Fatalf("given %d (%d first, %d second), want %d each once: %q", len(all), len(first), len(second), n, all)
	}
	// Taken again by the same message: the same, nothing new.
	again, _, _ := two.TakeHeldMessages(ctx, chat, "wamid.second")
	if !slices.Equal(again, second) {
		t.Fatalf("taken again: %q, want %q", again, second)
	}
	if left, _, _ := one.HeldMessages(ctx, chat); len(left) != 0 {
		t.Fatalf("still held: %q", left)
	}

	// The bound: four held, two kept.
	for i := range 4 {
		if _, err := one.HoldMessage(ctx, "whatsapp:2", fmt.Sprintf("p%d", i), 2); err != nil {
			t.Fatal(err)
		}
	}
	held, dropped, err := two.HeldMessages(ctx, "whatsapp:2")
	if err != nil || !slices.Equal(held, []string{"p2", "p3"}) || dropped != 2 {
		t.Fatalf("held %q, %d dropped, %v", held, dropped, err)
	}
}

// Held messages an earlier version kept as one state per chat move into
// held_messages when the database is opened.
func TestHeldStatesMoveIntoTheirTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db := openAt(t, path)
	ctx := context.Background()
	if err := db.SetState(ctx, "whatsapp:held:15550002", `{"parts":["one","two"],"dropped":3}`); err != nil {
		t.Fatal(err)
	}
	// As a database of the earlier schema is stamped.
	stampOlder(t, db)
	db.Close()
	db = openAt(t, path)
	held, dropped, err := db.HeldMessages(ctx, "whatsapp:15550002")
	if err != nil || !slices.Equal(held, []string{"one", "two"}) || dropped != 3 {
		t.Fatalf("held %q, %d dropped, %v", held, dropped, err)
	}
	if v, _ := db.State(ctx, "whatsapp:held:15550002"); v != "" {
		t.Fatalf("the state stayed: %q", v)
	}
}

// A pending MCP sign-in is taken once, whichever handle asks first.
func TestMCPSignInTakenOnce(t *testing.T) {
	one, two := twoHandles(t)
	ctx := context.Background()
	if err := one.SaveMCPSignIn(ctx, "h1", []byte("sealed"), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int32
	var wg sync.WaitGroup
	for _, db := range []*DB{one, two, one, two} {
		wg.Go(func() {
			sealed, _, err := db.TakeMCPSignIn(ctx, "h1")
			if err != nil {
				t.Error(err)
			}
			if string(sealed) == "sealed" {
				got.Add(1)
			}
		})
	}
	wg.Wait()
	if got.Load() != 1 {
		t.Fatalf("taken %d times", got.Load())
	}
}
