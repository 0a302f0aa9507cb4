package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loadout/chat"
)

// Charges add up per person, chat and day, on either database: Spent
// gives the person's day and month (across chats) and the chat's day
// (across people); SpendOver a chat's or a person's over a period.
func TestSpendAddsUpPerPersonChatAndDay(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	charge := func(user, chatKey, day string, prompt, completion int64, cost float64) {
		t.Helper()
		err := db.Charge(ctx, chat.Charge{UserKey: user, ChatKey: chatKey, Day: day,
			Spend: chat.Spend{PromptTokens: prompt, CompletionTokens: completion, CachedTokens: prompt / 2, Cost: cost}})
		if err != nil {
			t.Fatal(err)
		}
	}
	charge("ana", "group", "2026-11-26", 100, 10, 0.25)
	charge("ana", "group", "2026-11-26", 50, 5, 0.125)
	charge("ana", "private", "2026-11-26", 7, 3, 0.01)
	charge("ana", "group", "2026-11-02", 1000, 0, 1)
	charge("ana", "group", "2026-10-31", 5000, 0, 5) // last month
	charge("bea", "group", "2026-11-26", 20, 2, 0.5)
	charge("bea", "group", "2026-11-25", 40, 0, 0.5) // yesterday

	s, err := db.Spent(ctx, "ana", "group", "2026-11-26", "2026-11-01")
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if s.PersonDay.Tokens() != 175 || !near(s.PersonDay.Cost, 0.385) {
		t.Errorf("ana's day %+v", s.PersonDay)
	}
	if s.PersonMonth.Tokens() != 1175 || !near(s.PersonMonth.Cost, 1.385) {
		t.Errorf("ana's month %+v", s.PersonMonth)
	}
	if s.ChatDay.Tokens() != 187 || !near(s.ChatDay.Cost, 0.875) {
		t.Errorf("the group's day %+v", s.ChatDay)
	}
	// An empty key is not read.
	if p, err := db.Spent(ctx, "ana", "", "2026-11-26", "2026-11-01"); err != nil || p.PersonMonth != s.PersonMonth || p.PersonDay != s.PersonDay || p.ChatDay != (chat.Spend{}) {
		t.Errorf("the person alone: %+v, %v", p, err)
	}
	if c, err := db.Spent(ctx, "", "group", "2026-11-26", "2026-11-01"); err != nil || c.ChatDay != s.ChatDay || c.PersonDay != (chat.Spend{}) {
		t.Errorf("the chat alone: %+v, %v", c, err)
	}
	if none, err := db.Spent(ctx, "cy", "elsewhere", "2026-11-26", "2026-11-01"); err != nil || none != (chat.Spent{}) {
		t.Errorf("nobody's spend %+v, %v", none, err)
	}

	for _, c := range []struct {
		q      SpendQuery
		tokens int64
		cost   float64
	}{
		{SpendQuery{ChatKey: "group"}, 6227, 7.375},
		{SpendQuery{ChatKey: "group", From: "2026-11-01", To: "2026-11-30"}, 1227, 2.375},
		{SpendQuery{UserKey: "ana", From: "2026-11-26", To: "2026-11-26"}, 175, 0.385},
		{SpendQuery{UserKey: "bea", ChatKey: "group", To: "2026-11-25"}, 40, 0.5},
	} {
		got, err := db.SpendOver(ctx, c.q)
		if err != nil || got.Tokens() != c.tokens || !near(got.Cost, c.cost) {
			t.Errorf("SpendOver(%+v) = %+v, %v; want %d tokens, %v", c.q, got, err, c.tokens, c.cost)
		}
	}
}

// Charges made at once by several processes (here goroutines on two
// handles to one database) are all counted: the UPSERT adds in the
// database, never in a read-modify-write of its own.
func TestConcurrentChargesAllCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	one := openAt(t, path)
	two := openAt(t, path)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		db := one
		if i%2 == 1 {
			db = two
		}
		wg.Go(func() {
			if err := db.Charge(ctx, chat.Charge{UserKey: "ana", ChatKey: "c", Day: "2026-11-26", Spend: chat.Spend{PromptTokens: 10, CompletionTokens: 1}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s, err := two.Spent(ctx, "ana", "c", "2026-11-26", "2026-11-01")
	if err != nil || s.PersonDay.Tokens() != 440 {
		t.Fatalf("spent %+v, %v", s.PersonDay, err)
	}
}

func openAt(t *testing.T, path string) *DB {
	t.Helper()
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A database of the version before the spend caps (no spends table)
// gains the table when opened, keeping what it held.
func TestMigrateAddsTheSpendTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sess, err := db.OpenSession(ctx, "telegram:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Append(ctx, sess.ID, []chat.Message{{Role: chat.RoleUser, Text: "kept"}}, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm().Exec(`DROP TABLE spends`).Error; err != nil {
		t.Fatal(err)
	}
	// As a database of the earlier schema is stamped.
	stampOlder(t, db)
	db.Close()
	db = openAt(t, path)
	if err := db.Charge(ctx, chat.Charge{UserKey: "u", ChatKey: "telegram:1", Day: "2026-11-26", Spend: chat.Spend{PromptTokens: 3}}); err != nil {
		t.Fatal(err)
	}
	if s, err := db.Spent(ctx, "u", "telegram:1", "2026-11-26", "2026-11-01"); err != nil || s.ChatDay.PromptTokens != 3 {
		t.Fatalf("spent %+v, %v", s, err)
	}
	if msgs, err := db.Recent(ctx, sess.ID, 10); err != nil || len(msgs) != 1 || msgs[0].Text != "kept" {
		t.Fatalf("history %+v, %v", msgs, err)
	}
}

// Reservations made at once, by goroutines on two handles to one
// database (two replicas), never share room: each reads what was spent
// and charges its hold in one step no other reservation of the person or
// the chat runs beside, so a cap with room for two holds lets exactly
// two through, counted per person across chats and per chat across
// people. A refusal charges nothing.
func TestReservationsNeverShareRoom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	one, two := openAt(t, path), openAt(t, path)
	ctx := context.Background()
	errFull := errors.New("full")
	for _, c := range []struct {
		name  string
		who   func(i int) (user, chatKey string)
		spent func(chat.Spent) int64
	}{
		{"person", func(i int) (string, string) { return "ana", fmt.Sprint("c", i%3) }, func(s chat.Spent) int64 { return s.PersonDay.Tokens() }},
		{"chat", func(i int) (string, string) { return fmt.Sprint("u", i%3), "group" }, func(s chat.Spent) int64 { return s.ChatDay.Tokens() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ok atomic.Int32
			var wg sync.WaitGroup
			for i := range 20 {
				db := []*DB{one, two}[i%2]
				user, chatKey := c.who(i)
				wg.Go(func() {
					err := db.Reserve(ctx, user, chatKey, "2026-11-26", "2026-11-01", func(s chat.Spent) (chat.Spend, error) {
						// A while between the read and the charge,
						// for another reservation to come in.
						time.Sleep(5 * time.Millisecond)
						if c.spent(s)+100 > 250 {
							return chat.Spend{}, errFull
						}
						return chat.Spend{PromptTokens: 60, CompletionTokens: 40}, nil
					})
					switch {
					case err == nil:
						ok.Add(1)
					case !errors.Is(err, errFull):
						t.Error(err)
					}
				})
			}
			wg.Wait()
			var total int64
			for i := range 3 {
				user, chatKey := c.who(i)
				s, err := two.Spent(ctx, user, chatKey, "2026-11-26", "2026-11-01")
				if err != nil {
					t.Fatal(err)
				}
				total = max(total, c.spent(s))
			}
			if ok.Load() != 2 || total != 200 {
				t.Fatalf("%d reservations passed, holding %d tokens; want 2 holding 200", ok.Load(), total)
			}
		})
	}
}

// Settle replaces a hold with what the call cost, on the hold's day
// (a call that began before midnight is counted on its day), and the
// call is counted once.
func TestSettleReplacesTheHold(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	hold := chat.Spend{PromptTokens: 50, CompletionTokens: 500, Cost: 0.25}
	err := db.Reserve(ctx, "ana", "c", "2026-11-26", "2026-11-01", func(chat.Spent) (chat.Spend, error) { return hold, nil })
	if err != nil {
		t.Fatal(err)
	}
	if s, err := db.Spent(ctx, "ana", "c", "2026-11-26", "2026-11-01"); err != nil || s.PersonDay.Tokens() != 550 {
		t.Fatalf("held %+v, %v", s.PersonDay, err)
	}
	held := chat.Charge{UserKey: "ana", ChatKey: "c", Day: "2026-11-26", Spend: hold}
	if err := db.Settle(ctx, held, chat.Spend{PromptTokens: 40, CompletionTokens: 80, CachedTokens: 10, Cost: 0.06}); err != nil {
		t.Fatal(err)
	}
	s, err := db.Spent(ctx, "ana", "c", "2026-11-27", "2026-11-01")
	if err != nil || s.PersonDay.Tokens() != 0 || s.PersonMonth.Tokens() != 120 || math.Abs(s.PersonMonth.Cost-0.06) > 1e-9 {
		t.Fatalf("settled %+v, %v", s, err)
	}
	var calls int64
	if err := db.Gorm().Raw("SELECT calls FROM spends WHERE user_key = 'ana'").Scan(&calls).Error; err != nil || calls != 1 {
		t.Fatalf("%d calls counted, %v", calls, err)
	}
}
