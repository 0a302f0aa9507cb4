package store

import (
	"context"
	"path/filepath"
	"testing"
)

func TestTelegramInbox(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if off, err := db.TelegramOffset(ctx); err != nil || off != 0 {
		t.Fatalf("fresh offset = %d, %v", off, err)
	}
	for _, id := range []int64{10, 11, 12} {
		if fresh, err := db.TelegramAccept(ctx, id, "telegram:1", "telegram:1", "text", `{"chat":1}`); err != nil || !fresh {
			t.Fatalf("accept %d = %v, %v", id, fresh, err)
		}
	}
	if fresh, err := db.TelegramAccept(ctx, 11, "telegram:1", "telegram:1", "again", ""); err != nil || fresh {
		t.Fatalf("duplicate accept = %v, %v; want false", fresh, err)
	}
	if err := db.TelegramAnswered(ctx, 11, "the answer"); err != nil {
		t.Fatal(err)
	}
	if err := db.TelegramDone(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := db.TelegramSetOffset(ctx, 13); err != nil {
		t.Fatal(err)
	}
	if off, _ := db.TelegramOffset(ctx); off != 13 {
		t.Fatalf("offset = %d, want 13", off)
	}
	var ids []int64
	var replies []string
	if err := db.TelegramPending(ctx, func(id int64, chatKey, userKey, text, route, reply string) {
		ids = append(ids, id)
		replies = append(replies, reply)
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != 11 || ids[1] != 12 || replies[0] != "the answer" || replies[1] != "" {
		t.Fatalf("pending = %v %q", ids, replies)
	}
	// The done entry below the offset was pruned; a pending one never is.
	var n int64
	db.Gorm().Raw("SELECT count(*) FROM telegram_inboxes").Scan(&n)
	if n != 2 {
		t.Fatalf("%d inbox rows, want 2", n)
	}
}
