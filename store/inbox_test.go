package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"loadout/bridge"
	"loadout/chat"
)

func pend(id, chatKey, text string) bridge.Pending {
	return bridge.Pending{ID: id, Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "u", Text: text}, Route: []byte(`{"chat":1}`)}
}

func TestInboxLifecycle(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	a, fresh, err := db.Accept(ctx, "telegram", pend("update:1", "telegram:1", "one"), nil)
	if err != nil || !fresh || a.Seq == 0 || a.State != bridge.StatePending {
		t.Fatalf("Accept = %+v, %v, %v", a, fresh, err)
	}
	again, fresh, err := db.Accept(ctx, "telegram", pend("update:1", "telegram:1", "changed"), nil)
	if err != nil || fresh || again.Seq != a.Seq || again.Inbound.Text != "one" {
		t.Fatalf("redelivery = %+v, %v, %v; want the stored item", again, fresh, err)
	}
	// The same id on another channel is another event.
	if _, fresh, _ := db.Accept(ctx, "slack", pend("update:1", "slack:T:D", "x"), nil); !fresh {
		t.Fatal("an id of another channel was taken for a redelivery")
	}
	refusal, _, err := db.Accept(ctx, "telegram", pend("update:2", "telegram:9", "a stranger's secret"), []string{"Sorry."})
	if err != nil || refusal.State != bridge.StateAnswered || refusal.Inbound.Text != "" || !slices.Equal(refusal.Parts, []string{"Sorry."}) {
		t.Fatalf("pre-answered item = %+v, %v", refusal, err)
	}
	var secret int64
	db.Gorm().Raw("SELECT count(*) FROM inbox_items WHERE text LIKE '%secret%'").Scan(&secret)
	if secret != 0 {
		t.Fatal("the text of a pre-answered event was stored")
	}
	c, _, _ := db.Accept(ctx, "telegram", pend("update:3", "telegram:1", "three"), nil)

	if err := db.Answer(ctx, a.Seq, bridge.Answer{Parts: []string{"p1", "p2", "p3"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkSent(ctx, a.Seq, 2); err != nil {
		t.Fatal(err)
	}
	if err := db.Finish(ctx, refusal.Seq, bridge.StateDone); err != nil {
		t.Fatal(err)
	}
	items, err := db.Unfinished(ctx, "telegram")
	if err != nil || len(items) != 2 || items[0].Seq != a.Seq || items[1].Seq != c.Seq {
		t.Fatalf("unfinished = %+v, %v", items, err)
	}
	if it := items[0]; it.State != bridge.StateAnswered || it.Sent != 2 || !slices.Equal(it.Parts, []string{"p1", "p2", "p3"}) ||
		string(it.Route) != `{"chat":1}` || it.Inbound.ChatKey != "telegram:1" || it.ID != "update:1" {
		t.Fatalf("answered item = %+v", it)
	}
	if err := db.Finish(ctx, c.Seq, bridge.StatePending); err == nil {
		t.Fatal("Finish accepted a state that is not final")
	}
	if err := db.MarkSent(ctx, 9999, 1); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("MarkSent of a missing item = %v, want not found", err)
	}

	// Finished items are kept until pruned, so redeliveries stay known.
	db.Finish(ctx, a.Seq, bridge.StateDone)
	db.Finish(ctx, c.Seq, bridge.StateFailed)
	if n, err := db.Prune(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("early prune removed %d (%v)", n, err)
	}
	if _, fresh, _ := db.Accept(ctx, "telegram", pend("update:1", "telegram:1", "one"), nil); fresh {
		t.Fatal("a finished event's redelivery was accepted")
	}
	n, err := db.Prune(ctx, time.Now().Add(time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("prune removed %d (%v), want the 3 finished telegram items", n, err)
	}
}

// The unfinished-items query reads the partial index, not every event
// ever handled.
func TestUnfinishedUsesPartialIndex(t *testing.T) {
	db := open(t)
	if plan := queryPlan(t, db, "SELECT * FROM inbox_items WHERE channel = 'telegram' AND state IN ('pending','answered') ORDER BY seq"); !strings.Contains(plan, "idx_inbox_open") {
		t.Fatalf("plan %s", plan)
	}
}

// A database from before the shared inbox keeps its unanswered Telegram
// messages.
func TestOpenMovesTheTelegramInbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	g, err := gorm.Open(sqlite.Open(path), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE telegram_inboxes (update_id integer PRIMARY KEY, chat_key text NOT NULL, user_key text NOT NULL, text text, route text, reply text, state text NOT NULL, created_at datetime, updated_at datetime)`,
		`INSERT INTO telegram_inboxes VALUES (10, 'telegram:1', 'telegram:1', 'unanswered', '{"chat":1}', '', 'pending', '2026-01-01', '2026-01-01')`,
		`INSERT INTO telegram_inboxes VALUES (11, 'telegram:1', 'telegram:1', 'answered', '{"chat":1}', 'the reply', 'answered', '2026-01-01', '2026-01-01')`,
		`INSERT INTO telegram_inboxes VALUES (12, 'telegram:1', 'telegram:1', 'old', '{"chat":1}', 'x', 'done', '2026-01-01', '2026-01-01')`,
		`CREATE TABLE states (key text PRIMARY KEY, value text, updated_at datetime)`,
		`INSERT INTO states VALUES ('seen:slack:event:Ev1', '1', '2026-01-01'), ('telegram:offset', '13', '2026-01-01')`,
	} {
		if err := g.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	sqlDB, _ := g.DB()
	sqlDB.Close()

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	items, err := db.Unfinished(context.Background(), "telegram")
	if err != nil || len(items) != 2 {
		t.Fatalf("moved items = %+v, %v", items, err)
	}
	if items[0].ID != "update:10" || items[0].State != bridge.StatePending || items[0].Inbound.Text != "unanswered" ||
		items[1].ID != "update:11" || items[1].State != bridge.StateAnswered || !slices.Equal(items[1].Parts, []string{"the reply"}) ||
		string(items[1].Route) != `{"chat":1}` {
		t.Fatalf("moved items = %+v", items)
	}
	if db.Gorm().Migrator().HasTable("telegram_inboxes") {
		t.Fatal("the old table is still there")
	}
	if v, _ := db.State(context.Background(), "telegram:offset"); v != "13" {
		t.Fatalf("offset = %q, want it kept", v)
	}
	if v, _ := db.State(context.Background(), "seen:slack:event:Ev1"); v != "" {
		t.Fatal("old dedupe keys were kept")
	}
}

func TestErrorKinds(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind error
	}{
		{sqlite3.Error{Code: sqlite3.ErrBusy}, chat.ErrTransient},
		{fmt.Errorf("wrapped: %w", sqlite3.Error{Code: sqlite3.ErrLocked}), chat.ErrTransient},
		{context.DeadlineExceeded, chat.ErrTransient},
		{gorm.ErrRecordNotFound, chat.ErrNotFound},
	} {
		got := kind(c.err)
		if !errors.Is(got, c.kind) || !errors.Is(got, c.err) || got.Error() != c.err.Error() {
			t.Errorf("kind(%v) = %v; want %v kept and tagged %v", c.err, got, c.err, c.kind)
		}
	}
	plain := errors.New("constraint failed")
	if kind(plain) != plain || kind(nil) != nil {
		t.Error("an unclassified error was changed")
	}
}

func TestInboxStats(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := base
	db.now = func() time.Time { return now }
	accept := func(channel, id string) bridge.Item {
		t.Helper()
		it, _, err := db.Accept(ctx, channel, bridge.Pending{ID: id, Inbound: chat.Inbound{ChatKey: channel + ":1", Text: "hi"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
		return it
	}
	done := accept("telegram", "a")
	accept("telegram", "b")
	accept("telegram", "c")
	accept("slack", "x")
	if err := db.Finish(ctx, done.Seq, bridge.StateDone); err != nil {
		t.Fatal(err)
	}
	got, err := db.InboxStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []bridge.InboxStat{
		{Channel: "slack", Open: 1, Oldest: base.Add(3 * time.Minute)},
		{Channel: "telegram", Open: 2, Oldest: base.Add(time.Minute)},
	}
	if len(got) != 2 || got[0].Channel != want[0].Channel || got[0].Open != 1 || !got[0].Oldest.Equal(want[0].Oldest) ||
		got[1].Open != 2 || !got[1].Oldest.Equal(want[1].Oldest) {
		t.Fatalf("InboxStats = %+v, want %+v", got, want)
	}
}

// A task's run an earlier version stored — marked unattended only by its
// event id — is still run unattended after the upgrade.
func TestOpenMarksEarlierTaskRunsUnattended(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db.Accept(ctx, "telegram", pend("task:7:1700000000", "telegram:1", "run the report"), nil)
	db.Accept(ctx, "telegram", pend("update:1", "telegram:1", "hello"), nil)
	// As the earlier version left it: no mark, and its schema stamp.
	db.Gorm().Exec("UPDATE inbox_items SET unattended = false")
	db.Gorm().Exec("PRAGMA user_version = 1")
	db.Close()
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	items, err := db.Unfinished(ctx, "telegram")
	if err != nil || len(items) != 2 || !items[0].Unattended || items[1].Unattended {
		t.Fatalf("items %+v, %v", items, err)
	}
}
