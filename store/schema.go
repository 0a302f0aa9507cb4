package store

import (
	_ "embed"
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"

	"gorm.io/gorm"
)

// migrations is the version of the hand-written schema steps (indexes,
// moves of old tables) in migrate. Change it whenever they change; the
// models' own changes are noticed without it.
const migrations = 4

// models are the tables gorm migrates.
func models() []any {
	return []any{&session{}, &message{}, &chatSetting{}, &state{}, &inboxItem{}, &googleToken{}, &memoryRow{}, &taskRow{}, &taskRun{}, &customTool{}, &approvalRow{}, &googleState{}, &leaseRow{}, &voiceUsage{}}
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
	for _, m := range models() {
		t := reflect.TypeOf(m).Elem()
		fmt.Fprintf(h, "%s\n", t.Name())
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(h, "%s %s %q\n", f.Name, f.Type, f.Tag)
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
		if err := createTables(tx); err != nil {
			return err
		}
		// At most one open session per chat.
		if err := tx.Exec("CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_open ON sessions(chat_key) WHERE closed_at IS NULL").Error; err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if err := migrateInbox(tx); err != nil {
			return err
		}
		if err := searchSchema(tx, fts); err != nil {
			return err
		}
		return tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", stamp)).Error
	})
}

// modelsSQL is what AutoMigrate creates for models() in a new SQLite
// database, statement by statement (TestModelsSQL checks it and, with
// -update, writes it). A new database is given it as is: AutoMigrate
// asks SQLite about every table and builds each statement by reflection,
// which was an eighth of the processor time of a first start.
//
//go:embed models.sql
var modelsSQL string

// createTables brings the models' tables to this build's: in a new
// database (no table yet) by modelsSQL, else by AutoMigrate.
func createTables(tx *gorm.DB) error {
	var tables int64
	if err := tx.Raw("SELECT count(*) FROM sqlite_master WHERE type = 'table'").Scan(&tables).Error; err != nil {
		return err
	}
	if tables > 0 {
		return tx.AutoMigrate(models()...)
	}
	for _, stmt := range strings.Split(modelsSQL, ";\n") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			if err := tx.Exec(stmt).Error; err != nil {
				return fmt.Errorf("create the tables: %w", err)
			}
		}
	}
	return nil
}
