package store

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// A person's sealed sign-in to an MCP server is kept per server and
// person, replaced, and removed; a database of the schema before sign-ins
// (no mcp_tokens table, an older stamp) gets the table when opened.
func TestMCPTokensPerServerAndPerson(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	g := db.Gorm()
	if err := g.Exec("DROP TABLE mcp_tokens").Error; err != nil {
		t.Fatal(err)
	}
	stampOlder(t, db)
	db.Close()
	db, err = OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if got, err := db.MCPToken(ctx, "notes", "telegram:42"); err != nil || got != nil {
		t.Fatalf("none stored = %q, %v", got, err)
	}
	for _, s := range []struct{ server, user, sealed string }{
		{"notes", "telegram:42", "ana-1"}, {"notes", "telegram:43", "bea"}, {"tracker", "telegram:42", "ana-t"}, {"notes", "telegram:42", "ana-2"},
	} {
		if err := db.SaveMCPToken(ctx, s.server, s.user, []byte(s.sealed)); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ server, user, want string }{
		{"notes", "telegram:42", "ana-2"}, {"notes", "telegram:43", "bea"}, {"tracker", "telegram:42", "ana-t"}, {"tracker", "telegram:43", ""},
	} {
		got, err := db.MCPToken(ctx, w.server, w.user)
		if err != nil || !bytes.Equal(got, []byte(w.want)) && !(w.want == "" && got == nil) {
			t.Errorf("%s %s = %q, %v; want %q", w.server, w.user, got, err, w.want)
		}
	}
	if err := db.DeleteMCPToken(ctx, "notes", "telegram:42"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.MCPToken(ctx, "notes", "telegram:42"); got != nil {
		t.Fatalf("after delete = %q", got)
	}
	if got, _ := db.MCPToken(ctx, "tracker", "telegram:42"); string(got) != "ana-t" {
		t.Fatalf("another server's sign-in went with it: %q", got)
	}
}
