package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/chat"
	"loadout/tools"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

func open(t *testing.T) *DB {
	t.Helper()
	db, err := OpenTest(filepath.Join(t.TempDir(), "sub", "dir", "loadout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenCreatesDirectoryAndUsesWAL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "x.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	var mode string
	db.Gorm().Raw("PRAGMA journal_mode").Scan(&mode)
	var busy int
	db.Gorm().Raw("PRAGMA busy_timeout").Scan(&busy)
	if mode != "wal" || busy < 1000 {
		t.Fatalf("journal_mode=%s busy_timeout=%d", mode, busy)
	}
}

// Recent gives back every field the history uses as it was appended, and
// an empty one as empty (the query reads empty text as NULL).
func TestRecentReadsBackEveryField(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	s, err := db.OpenSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.Message{
		{Role: chat.RoleUser, Text: "hi ✓", UserKey: "telegram:1", ExternalID: "42", Tokens: 3},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "a", Name: "load_tool_group", Arguments: `{"group_name":"pdf"}`}}, Tokens: 9},
		{Role: chat.RoleTool, ToolCallID: "a", ToolName: "load_tool_group", Status: tools.StatusSuccess, Groups: tools.LoadChanges("pdf"), Text: "Loaded",
			Arguments: `{"group_name":"pdf"}`, Tokens: 2},
		{Role: chat.RoleTool, ToolCallID: "b", ToolName: "web", Status: tools.StatusError, Code: "timeout", Text: "{}", Tokens: 1},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c", Name: "find_tools", Arguments: `{"query":"mail","load":true}`}}, Tokens: 9},
		{Role: chat.RoleTool, ToolCallID: "c", ToolName: "find_tools", Status: tools.StatusSuccess, Text: "Loaded groups: gmail.",
			Groups: []tools.GroupChange{{Name: "gmail"}, {Name: "pdf", Unload: true}}, Tokens: 4},
		{Role: chat.RoleAssistant, Text: "I need your approval first", Ask: "k7f2abcdefghijkm", Tokens: 5},
		{Role: chat.RoleAssistant, Text: "", Tokens: 0},
	}
	if err := db.Append(ctx, s.ID, want, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Recent(ctx, s.ID, 10)
	if err != nil || len(got) != len(want) {
		t.Fatalf("Recent = %d messages, %v", len(got), err)
	}
	for i := range want {
		got[i].ID = 0
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("message %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestSessionsOpenAppendClose(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	s1, err := db.OpenSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := db.OpenSession(ctx, "c")
	if again.ID != s1.ID {
		t.Fatalf("second open gave session %d, want %d", again.ID, s1.ID)
	}
	msgs := []chat.Message{
		{Role: chat.RoleUser, Text: "hi", UserKey: "u", Tokens: 3},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "a", Name: "load_tool_group", Arguments: `{"group_name":"pdf"}`}}},
		{Role: chat.RoleTool, ToolCallID: "a", ToolName: "load_tool_group", Status: tools.StatusSuccess, Groups: tools.LoadChanges("pdf"), Text: "Loaded", Arguments: `{"group_name":"pdf"}`},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "b", Name: "load_tool_group", Arguments: `{"group_name":"nope"}`}}},
		{Role: chat.RoleTool, ToolCallID: "b", ToolName: "load_tool_group", Status: tools.StatusError, Code: "not_found", Text: "{}"},
	}
	if err := db.Append(ctx, s1.ID, msgs, chat.Usage{PromptTokens: 7, CompletionTokens: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Recent(ctx, s1.ID, 4)
	if err != nil || len(got) != 4 || got[0].ToolCalls[0].Name != "load_tool_group" || got[3].Code != "not_found" {
		t.Fatalf("Recent = %+v, %v", got, err)
	}
	groups, err := db.LoadedGroups(ctx, s1.ID)
	if err != nil || !slices.Equal(groups, []string{"pdf"}) {
		t.Fatalf("LoadedGroups = %v, %v", groups, err)
	}
	s, _ := db.OpenSession(ctx, "c")
	if s.Messages != 5 || s.Usage.PromptTokens != 7 || s.Usage.CompletionTokens != 2 {
		t.Fatalf("counters = %+v", s)
	}
	if open, err := db.CloseSession(ctx, "c"); !open || err != nil {
		t.Fatalf("CloseSession = %v, %v", open, err)
	}
	if open, _ := db.CloseSession(ctx, "c"); open {
		t.Fatal("second close reported an open session")
	}
	s2, _ := db.OpenSession(ctx, "c")
	if s2.ID == s1.ID {
		t.Fatal("a closed session was reopened")
	}
	if g, _ := db.LoadedGroups(ctx, s2.ID); len(g) != 0 {
		t.Fatalf("new session has groups %v", g)
	}
}

// The loaded-groups query must be answered from an index, not a scan of
// the session's history.
func TestLoadedGroupsUsesIndex(t *testing.T) {
	db := open(t)
	joined := queryPlan(t, db, "SELECT id, group_changes FROM messages WHERE session_id = 1 AND tool_name IN ('load_tool_group', 'unload_tool_group', 'find_tools') AND status = 'success' AND group_changes <> ''")
	want := "COVERING INDEX idx_messages_loaded"
	if db.pg {
		want = "Index Only Scan using idx_messages_loaded"
	}
	if !strings.Contains(joined, want) {
		t.Fatalf("plan does not use the covering index: %s", joined)
	}
}

// queryPlan is how the database would run query: SQLite's EXPLAIN QUERY
// PLAN, or PostgreSQL's EXPLAIN with sequential scans priced out (a test
// table is too small for the planner to prefer an index otherwise; what
// matters is that one can answer the query).
func queryPlan(t *testing.T, db *DB, query string) string {
	t.Helper()
	var lines []string
	if !db.pg {
		var plan []struct{ Detail string }
		if err := db.Gorm().Raw("EXPLAIN QUERY PLAN " + query).Scan(&plan).Error; err != nil {
			t.Fatal(err)
		}
		for _, p := range plan {
			lines = append(lines, p.Detail)
		}
		return strings.Join(lines, "; ")
	}
	err := db.Gorm().Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
			return err
		}
		return tx.Raw("EXPLAIN " + query).Scan(&lines).Error
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "; ")
}

func TestChatSettingsAndState(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	if err := db.SetChatSetting(ctx, "c", "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	db.SetChatSetting(ctx, "c", "name", "Bea")
	db.SetChatSetting(ctx, "d", "name", "Other")
	m, err := db.ChatSettings(ctx, "c")
	if err != nil || m["name"] != "Bea" || len(m) != 1 {
		t.Fatalf("settings = %v, %v", m, err)
	}
	db.SetChatSetting(ctx, "c", "name", "")
	if m, _ := db.ChatSettings(ctx, "c"); len(m) != 0 {
		t.Fatalf("empty value did not delete: %v", m)
	}
	if v, err := db.State(ctx, "offset"); v != "" || err != nil {
		t.Fatalf("unset state = %q, %v", v, err)
	}
	db.SetState(ctx, "offset", "41")
	db.SetState(ctx, "offset", "42")
	if v, _ := db.State(ctx, "offset"); v != "42" {
		t.Fatalf("state = %q", v)
	}
}

func TestAppendSavesAnySizeOfRound(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	s, err := db.OpenSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]chat.Message, 5000)
	for i := range msgs {
		msgs[i] = chat.Message{Role: chat.RoleTool, ToolCallID: fmt.Sprint(i), ToolName: "t", Status: tools.StatusSuccess, Text: "ok", Arguments: "{}"}
	}
	if err := db.Append(ctx, s.ID, msgs, chat.Usage{PromptTokens: 7}); err != nil {
		t.Fatalf("Append of 5,000 messages: %v", err)
	}
	got, err := db.Recent(ctx, s.ID, 6000)
	if err != nil || len(got) != 5000 || got[0].ToolCallID != "0" || got[4999].ToolCallID != "4999" {
		t.Fatalf("Recent = %d messages, %v", len(got), err)
	}
	if s, _ = db.OpenSession(ctx, "c"); s.Messages != 5000 || s.Usage.PromptTokens != 7 {
		t.Fatalf("session counters = %d messages, %+v", s.Messages, s.Usage)
	}
}

// A database already at this build's schema is not migrated again at
// open; one stamped otherwise is.
func TestOpenMigratesOnlyWhenTheSchemaDiffers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	if stamp := storedStamp(t, db); stamp != schemaStamp(db.fts || db.pg) || stamp == 0 {
		t.Fatalf("stored stamp = %d, want the stamp %d", stamp, schemaStamp(db.fts || db.pg))
	}
	// Drop an index by hand: with the stamp in place it stays dropped,
	// which shows the migration was skipped.
	if err := db.Gorm().Exec("DROP INDEX idx_sessions_open").Error; err != nil {
		t.Fatal(err)
	}
	db.Close()
	hasIndex := func(db *DB) bool {
		var n int
		q := "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'idx_sessions_open'"
		if db.pg {
			q = "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'idx_sessions_open'"
		}
		db.Gorm().Raw(q).Scan(&n)
		return n == 1
	}
	db, err = OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	if hasIndex(db) {
		t.Fatal("the schema was migrated though its stamp matched")
	}
	stampOlder(t, db)
	db.Close()
	db, err = OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !hasIndex(db) {
		t.Fatal("a database stamped with another schema was not migrated")
	}
}

// storedStamp is the schema stamp db keeps.
func storedStamp(t *testing.T, db *DB) int32 {
	t.Helper()
	if db.pg {
		stamp, err := pgStamp(db.Gorm())
		if err != nil {
			t.Fatal(err)
		}
		return stamp
	}
	var stamp int32
	db.Gorm().Raw("PRAGMA user_version").Scan(&stamp)
	return stamp
}

// stampOlder stamps db's schema as an earlier build left it: the next
// open migrates it.
func stampOlder(t *testing.T, db *DB) {
	t.Helper()
	q := "PRAGMA user_version = 1"
	if db.pg {
		q = "UPDATE schema_stamp SET stamp = 1"
	}
	if err := db.Gorm().Exec(q).Error; err != nil {
		t.Fatal(err)
	}
}

// Groups come back in the order they were loaded, not sorted, and later
// unloads take them out: the catalog is rebuilt in the same order after a
// restart, so the tools array keeps its prompt-cache prefix.
func TestLoadedGroupsFollowLoadOrderAndUnloads(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	s, err := db.OpenSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	// Changes are written as an earlier version stored them: "name"
	// loads, "-name" unloads.
	result := func(tool, changes string) chat.Message {
		return chat.Message{Role: chat.RoleTool, ToolCallID: "x", ToolName: tool, Status: tools.StatusSuccess, Groups: joinedGroupChanges(changes), Text: "ok"}
	}
	steps := []struct {
		msg  chat.Message
		want []string
	}{
		{result(tools.LoadGroupName, "pdf"), []string{"pdf"}},
		{result(tools.FindToolsName, "calendar,drive"), []string{"pdf", "calendar", "drive"}},
		{result(tools.LoadGroupName, "calendar"), []string{"pdf", "calendar", "drive"}},
		{result(tools.UnloadGroupName, "-calendar"), []string{"pdf", "drive"}},
		{chat.Message{Role: chat.RoleTool, ToolName: tools.UnloadGroupName, Status: tools.StatusError, Groups: joinedGroupChanges("-pdf"), Text: "{}"}, []string{"pdf", "drive"}},
		{result(tools.LoadGroupName, "-drive,gmail"), []string{"pdf", "gmail"}},
		{result(tools.LoadGroupName, "calendar"), []string{"pdf", "gmail", "calendar"}},
	}
	for i, st := range steps {
		if err := db.Append(ctx, s.ID, []chat.Message{st.msg}, chat.Usage{}); err != nil {
			t.Fatal(err)
		}
		got, err := db.LoadedGroups(ctx, s.ID)
		if err != nil || !slices.Equal(got, st.want) {
			t.Fatalf("step %d: LoadedGroups = %v, %v; want %v", i, got, err, st.want)
		}
	}
}

// Processes starting together on one database migrate it one after the
// other (PostgreSQL: under an advisory lock of the schema), and all open
// it; their first messages to one chat, at the same moment, share the
// one session (on PostgreSQL the later insert meets the unique index and
// reads the session the first made).
func TestConcurrentOpensMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			db, err := OpenTest(path)
			if err == nil {
				_, err = db.OpenSession(context.Background(), "c")
				db.Close()
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Advisory locks are the database's, not a schema's: one schema's
// migration, or any lock of its keys, never holds up another's. (One
// lock for the whole database once queued every test process of a run
// behind the others' migrations, and a restart past its deadline.)
func TestSchemasOfOneDatabaseLockApart(t *testing.T) {
	if os.Getenv(TestDSNVar) == "" {
		t.Skip("PostgreSQL only: set " + TestDSNVar)
	}
	a, err := OpenTest(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// a holds, on a connection of its own, what b would take: its
	// migration's lock and a chat's key under the same names.
	ctx := context.Background()
	conn, err := a.Gorm().DB()
	if err != nil {
		t.Fatal(err)
	}
	c, err := conn.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pathB := filepath.Join(t.TempDir(), "b.db")
	schemaB := testSchema(pathB)
	for _, name := range []string{"loadout migrate", "hit:telegram:42"} {
		if _, err := c.ExecContext(ctx, "SELECT pg_advisory_lock($1)", advisoryKey(a.schema, name)); err != nil {
			t.Fatal(err)
		}
	}
	if advisoryKey(a.schema, "loadout migrate") == advisoryKey(schemaB, "loadout migrate") {
		t.Fatalf("schemas %s and %s share a lock key", a.schema, schemaB)
	}
	done := make(chan error, 1)
	go func() {
		b, err := OpenTest(pathB)
		if err == nil {
			_, err = b.Hit(ctx, "telegram:42", "1", 10, time.Minute)
			b.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("another schema's open waited on this one's locks")
	}
}

// Every model names its table as gorm's naming strategy would have.
func TestTableNames(t *testing.T) {
	for _, m := range models() {
		typ := reflect.TypeOf(m).Elem()
		tabler, ok := m.(interface{ TableName() string })
		if !ok {
			t.Errorf("%s has no TableName", typ.Name())
			continue
		}
		want := schema.NamingStrategy{}.TableName(typ.Name())
		if typ.Name() == "memoryRow" || typ.Name() == "taskRow" || typ.Name() == "approvalRow" || typ.Name() == "leaseRow" || typ.Name() == "embeddingRow" {
			continue // named otherwise from the start (embeddingRow: "embeddings", read better than "embedding_rows")
		}
		if got := tabler.TableName(); got != want {
			t.Errorf("%s.TableName() = %q, gorm names it %q", typ.Name(), got, want)
		}
	}
}
