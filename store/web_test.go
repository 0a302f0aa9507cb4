package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"loadout/chat"
	"loadout/ui"
)

// A database of the version before the web console (no web tables, no
// index of a person's messages) gains them when opened, keeping its
// messages, which the traffic totals then count once.
func TestMigrateAddsTheWebTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := db.OpenSession(ctx, "telegram:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Append(ctx, s.ID, []chat.Message{{Role: chat.RoleUser, Text: "hi", UserKey: "telegram:1"}, {Role: chat.RoleAssistant, Text: "hello"}},
		chat.Usage{PromptTokens: 7, CompletionTokens: 3}); err != nil {
		t.Fatal(err)
	}
	g := db.Gorm()
	for _, stmt := range []string{`DROP TABLE web_sessions`, `DROP TABLE web_links`, `DROP TABLE traffic_hours`, `DROP TABLE web_people`, `DROP INDEX idx_messages_user`, `DROP INDEX idx_messages_people`} {
		if err := g.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// As a database of the earlier schema is stamped.
	stampOlder(t, db)
	db.Close()

	db, err = OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !db.Gorm().Migrator().HasIndex("messages", "idx_messages_user") || !db.Gorm().Migrator().HasIndex("messages", "idx_messages_people") {
		t.Error("no index of a person's messages")
	}
	now := time.Now()
	if err := db.CreateWebSession(ctx, ui.Session{ID: "h", UserKey: "telegram:1", CSRF: "c", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	chats, err := db.Chats(ctx, "telegram:1", "", 10)
	if err != nil || len(chats) != 1 || chats[0].ChatKey != "telegram:1" || len(chats[0].People) != 1 {
		t.Fatalf("the person's chats: %+v %v", chats, err)
	}
	for range 2 { // counted once, however often asked
		hours, err := db.Traffic(ctx, now.Add(-time.Hour))
		if err != nil || len(hours) != 1 || hours[0].Messages != 2 || hours[0].Channel != "telegram" {
			t.Fatalf("traffic: %+v %v", hours, err)
		}
	}
}

// A sign-in link is taken once.
func TestWebLinkTakenOnce(t *testing.T) {
	db, err := OpenTest(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.CreateWebLink(ctx, "h1", "telegram:1", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if user, _, err := db.TakeWebLink(ctx, "h1"); err != nil || user != "telegram:1" {
		t.Fatalf("first take: %q %v", user, err)
	}
	if _, _, err := db.TakeWebLink(ctx, "h1"); err == nil {
		t.Fatal("taken twice")
	}
}
