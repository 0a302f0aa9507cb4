package store

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/chat"
	"loadout/tools"
)

// oldMessages turns db's messages table back into the form an earlier
// version wrote (no ask_id or group_changes; group_name with its index)
// and writes msgs into it as that version did: the approval's id in code
// as "ask:<id>", group changes in group_name as "name" and "-name"
// joined by commas.
func oldMessages(t *testing.T, db *DB, sessionID int64, msgs []chat.Message, old map[int]string) {
	t.Helper()
	g := db.Gorm()
	for _, s := range []string{
		`DROP INDEX idx_messages_loaded`,
		`ALTER TABLE messages DROP COLUMN ask_id`,
		`ALTER TABLE messages DROP COLUMN group_changes`,
		`ALTER TABLE messages ADD COLUMN group_name text`,
		`CREATE INDEX idx_messages_loaded ON messages (session_id, tool_name, status, group_name)`,
	} {
		if err := g.Exec(s).Error; err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	for i, m := range msgs {
		code, groups := m.Code, old[i]
		if m.Ask != "" {
			code = "ask:" + m.Ask
		}
		err := g.Exec(`INSERT INTO messages (session_id, role, text, tool_calls, tool_call_id, tool_name, status, group_name, code,
			arguments, user_key, external_id, tokens, prompt_tokens, completion_tokens, cached_tokens, created_at)
			VALUES (?, ?, ?, '', ?, ?, ?, ?, ?, '', '', '', ?, 0, 0, 0, ?)`,
			sessionID, string(m.Role), m.Text, m.ToolCallID, m.ToolName, m.Status, groups, code, m.Tokens, time.Now().UTC()).Error
		if err != nil {
			t.Fatal(err)
		}
	}
	// As a database of the earlier schema is stamped.
	stampOlder(t, db)
}

// A database an earlier version wrote, with an approval's id inside code
// and group changes joined in group_name, reads after migrating as this
// version writes it: the id in Ask (code left to error codes), the
// changes typed, the loaded groups rebuilt by the one indexed query.
func TestMigrateMovesTextEncodingsToColumns(t *testing.T) {
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
	want := []chat.Message{
		{Role: chat.RoleUser, Text: "read the pdf, then mail it", Tokens: 3},
		{Role: chat.RoleTool, ToolCallID: "a", ToolName: tools.LoadGroupName, Status: tools.StatusSuccess, Text: "Loaded",
			Groups: tools.LoadChanges("pdf"), Tokens: 1},
		{Role: chat.RoleTool, ToolCallID: "b", ToolName: tools.FindToolsName, Status: tools.StatusSuccess, Text: "Loaded groups: drive, gmail.",
			Groups: tools.LoadChanges("drive", "gmail"), Tokens: 1},
		{Role: chat.RoleTool, ToolCallID: "c", ToolName: tools.UnloadGroupName, Status: tools.StatusSuccess, Text: "Unloaded",
			Groups: []tools.GroupChange{{Name: "pdf", Unload: true}}, Tokens: 1},
		{Role: chat.RoleTool, ToolCallID: "d", ToolName: "gmail_send", Status: tools.StatusError, Code: "timeout", Text: "{}", Tokens: 1},
		{Role: chat.RoleAssistant, Text: "I need your approval first", Ask: "k7f2abcdefghijkm", Tokens: 2},
	}
	oldMessages(t, db, s.ID, want, map[int]string{1: "pdf", 2: "drive,gmail", 3: "-pdf"})
	db.Close()

	for reopen := range 2 { // migrated once; the second open finds it done
		db, err = OpenTest(path)
		if err != nil {
			t.Fatalf("open %d: %v", reopen, err)
		}
		got, err := db.Recent(ctx, s.ID, 10)
		if err != nil || len(got) != len(want) {
			t.Fatalf("open %d: Recent = %d messages, %v", reopen, len(got), err)
		}
		for i := range want {
			got[i].ID = 0
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("open %d, message %d:\n got %+v\nwant %+v", reopen, i, got[i], want[i])
			}
		}
		groups, err := db.LoadedGroups(ctx, s.ID)
		if err != nil || !slices.Equal(groups, []string{"drive", "gmail"}) {
			t.Errorf("open %d: LoadedGroups = %v, %v", reopen, groups, err)
		}
		if db.Gorm().Migrator().HasColumn(&message{}, "group_name") {
			t.Errorf("open %d: group_name is still there", reopen)
		}
		plan := queryPlan(t, db, "SELECT id, group_changes FROM messages WHERE session_id = 1 AND tool_name IN ('load_tool_group', 'unload_tool_group', 'find_tools') AND status = 'success' AND group_changes <> ''")
		if !strings.Contains(plan, "idx_messages_loaded") {
			t.Errorf("open %d: the loaded-groups query does not use its index after migrating: %s", reopen, plan)
		}
		db.Close()
	}
}

// The old text forms are read as they were written: "name" loads,
// "-name" unloads, commas separate, empty pieces mean nothing.
func TestJoinedGroupChanges(t *testing.T) {
	for in, want := range map[string][]tools.GroupChange{
		"":                 nil,
		"pdf":              {{Name: "pdf"}},
		"calendar,drive":   {{Name: "calendar"}, {Name: "drive"}},
		"-drive,gmail":     {{Name: "drive", Unload: true}, {Name: "gmail"}},
		"pdf,,-calendar,-": {{Name: "pdf"}, {Name: "calendar", Unload: true}},
	} {
		if got := joinedGroupChanges(in); !reflect.DeepEqual(got, want) {
			t.Errorf("joinedGroupChanges(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// Group changes go through the store as they came: order, unloads and
// none at all.
func TestGroupChangesRoundTrip(t *testing.T) {
	for _, changes := range [][]tools.GroupChange{
		nil,
		tools.LoadChanges("pdf"),
		{{Name: "gmail"}, {Name: "pdf", Unload: true}, {Name: "drive"}},
	} {
		enc, err := encodeGroups(changes)
		if err != nil {
			t.Fatal(err)
		}
		if (enc == "") != (len(changes) == 0) {
			t.Errorf("encodeGroups(%+v) = %q: only no changes is empty", changes, enc)
		}
		got, err := decodeGroups(enc)
		if err != nil || !reflect.DeepEqual(got, changes) {
			t.Errorf("decodeGroups(%q) = %+v, %v; want %+v", enc, got, err, changes)
		}
	}
}
