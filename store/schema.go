package store

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"loadout/tools"
)

// migrations is the version of the hand-written schema steps (indexes,
// moves of old tables) in migrate and migratePostgres. Change it whenever they change; the
// models' own changes are noticed without it.
const migrations = 8

// models are the tables gorm migrates.
func models() []any {
	return []any{&session{}, &message{}, &chatSetting{}, &state{}, &inboxItem{}, &googleToken{}, &memoryRow{}, &taskRow{}, &taskRun{}, &customTool{}, &approvalRow{}, &googleState{}, &leaseRow{}, &voiceUsage{}, &rule{}, &auditEntry{}, &spend{}, &webSession{}, &webLink{}, &trafficHour{}, &webPerson{}, &mcpToken{}, &mcpSignIn{}, &cursor{}, &rateHit{}, &heldMessage{}, &question{}, &embeddingRow{}, &embedMark{}, &trigger{}}
}

// The models' tables are named by hand, as gorm's naming strategy would
// (TestTableNames): gorm otherwise makes each name plural through a list
// of regular expressions every time it parses a model, which the first
// start of a new database does for every one.
func (session) TableName() string     { return "sessions" }
func (message) TableName() string     { return "messages" }
func (chatSetting) TableName() string { return "chat_settings" }
func (state) TableName() string       { return "states" }
func (inboxItem) TableName() string   { return "inbox_items" }
func (googleToken) TableName() string { return "google_tokens" }
func (taskRun) TableName() string     { return "task_runs" }
func (customTool) TableName() string  { return "custom_tools" }
func (googleState) TableName() string { return "google_states" }
func (voiceUsage) TableName() string  { return "voice_usages" }

// schemaStamp fingerprints the schema this build expects: every model's
// fields with their types and tags, and the migrations version. Open
// stores it as the database's user_version once migrated and skips
// migrating while the two agree, which keeps a restart from spending
// milliseconds asking SQLite about every table and column.
func schemaStamp(fts bool) int32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "migrations %d fts5 %v\n", migrations, fts)
	// Written piece by piece, not formatted: every start computes it.
	w := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
		}
	}
	for _, m := range models() {
		t := reflect.TypeOf(m).Elem()
		w(t.Name(), "\n")
		for i := range t.NumField() {
			f := t.Field(i)
			w(f.Name, " ", f.Type.String(), " ", strconv.Quote(string(f.Tag)), "\n")
		}
	}
	return int32(h.Sum32() & 0x7fffffff)
}

// migrate brings the database's schema to this build's, unless its stamp
// says it is there already. It runs in one immediate transaction: a
// second process starting on the same file waits for the first to finish
// and then finds the stamp in place.
func migrate(g *gorm.DB, fts bool) error {
	stamp := schemaStamp(fts)
	var have int32
	if err := g.Raw("PRAGMA user_version").Scan(&have).Error; err != nil {
		return err
	}
	if have == stamp {
		return nil
	}
	return g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw("PRAGMA user_version").Scan(&have).Error; err != nil {
			return err
		}
		if have == stamp {
			return nil // another process migrated it meanwhile
		}
		if err := migrateMessages(tx); err != nil {
			return err
		}
		if err := createTables(tx); err != nil {
			return err
		}
		// At most one open session per chat.
		if err := tx.Exec("CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_open ON sessions(chat_key) WHERE closed_at IS NULL").Error; err != nil {
			return fmt.Errorf("index: %w", err)
		}
		// A person's chats (the web console's pages): the sessions they
		// wrote in.
		for _, stmt := range personIndexes {
			if err := tx.Exec(stmt).Error; err != nil {
				return fmt.Errorf("index: %w", err)
			}
		}
		if err := migrateInbox(tx); err != nil {
			return err
		}
		if err := moveHeldStates(tx); err != nil {
			return fmt.Errorf("move the held messages: %w", err)
		}
		if err := tx.Exec(waitingQuestions).Error; err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if err := searchSchema(tx, fts); err != nil {
			return err
		}
		if err := tx.Exec(sqliteAuditGuard).Error; err != nil {
			return fmt.Errorf("guard the audit trail: %w", err)
		}
		return tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", stamp)).Error
	})
}

// migrateMessages moves what an earlier version kept as text inside
// messages' columns into columns of their own, once, before the models
// are migrated: an approval's id, kept in code as "ask:<id>", goes to
// ask_id; a call's group changes, kept in group_name as "name" and
// "-name" joined by commas, go to group_changes in encodeGroups' form,
// and group_name is dropped. Each move runs in a transaction with the
// column it fills, so a database has either both or neither; a database
// that has the columns is not read. It serves SQLite and PostgreSQL.
func migrateMessages(g *gorm.DB) error {
	m := g.Migrator()
	if !m.HasTable("messages") { // by name: a new database parses no model
		return nil // a new database: AutoMigrate creates it as it is
	}
	if !m.HasColumn(&message{}, "AskID") {
		err := g.Transaction(func(tx *gorm.DB) error {
			if err := tx.Migrator().AddColumn(&message{}, "AskID"); err != nil {
				return err
			}
			return tx.Exec(`UPDATE messages SET ask_id = substr(code, 5), code = '' WHERE role = 'assistant' AND code LIKE 'ask:%'`).Error
		})
		if err != nil {
			return fmt.Errorf("move approval ids out of messages.code: %w", err)
		}
	}
	if !m.HasColumn(&message{}, "GroupChanges") {
		err := g.Transaction(func(tx *gorm.DB) error {
			if err := tx.Migrator().AddColumn(&message{}, "GroupChanges"); err != nil {
				return err
			}
			if !tx.Migrator().HasColumn(&message{}, "group_name") {
				return nil
			}
			var rows []struct {
				ID        int64
				GroupName string
			}
			if err := tx.Raw(`SELECT id, group_name FROM messages WHERE group_name <> ''`).Scan(&rows).Error; err != nil {
				return err
			}
			for _, r := range rows {
				enc, err := encodeGroups(joinedGroupChanges(r.GroupName))
				if err != nil {
					return err
				}
				if err := tx.Exec(`UPDATE messages SET group_changes = ? WHERE id = ?`, enc, r.ID).Error; err != nil {
					return err
				}
			}
			// The loaded-groups index covered group_name: AutoMigrate
			// (and on PostgreSQL migratePostgres) builds it again over
			// group_changes.
			if err := tx.Exec(`DROP INDEX IF EXISTS idx_messages_loaded`).Error; err != nil {
				return err
			}
			return tx.Exec(`ALTER TABLE messages DROP COLUMN group_name`).Error
		})
		if err != nil {
			return fmt.Errorf("move group changes out of messages.group_name: %w", err)
		}
	}
	return nil
}

// joinedGroupChanges reads the group changes an earlier version stored
// as text: names joined by commas, an unload marked by a leading "-".
func joinedGroupChanges(s string) []tools.GroupChange {
	var out []tools.GroupChange
	for c := range strings.SplitSeq(s, ",") {
		name, unload := strings.CutPrefix(c, "-")
		if name != "" {
			out = append(out, tools.GroupChange{Name: name, Unload: unload})
		}
	}
	return out
}

// createTables brings the models' tables to this build's. A new
// database has them already unless it was not made from a seed (see
// seed): AutoMigrate creates what is missing and adds missing columns.
func createTables(tx *gorm.DB) error {
	return tx.AutoMigrate(models()...)
}
