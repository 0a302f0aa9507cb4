package store

import (
	"fmt"
	"hash/fnv"
	"reflect"

	"gorm.io/gorm"
)

// migrations is the version of the hand-written schema steps (indexes,
// moves of old tables) in migrate. Change it whenever they change; the
// models' own changes are noticed without it.
const migrations = 2

// models are the tables gorm migrates.
func models() []any {
	return []any{&session{}, &message{}, &chatSetting{}, &state{}, &inboxItem{}, &googleToken{}, &memoryRow{}, &taskRow{}, &taskRun{}, &customTool{}, &approvalRow{}, &googleState{}, &leaseRow{}}
}

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
// says it is there already.
func migrate(g *gorm.DB, fts bool) error {
	stamp := schemaStamp(fts)
	var have int32
	if err := g.Raw("PRAGMA user_version").Scan(&have).Error; err != nil {
		return err
	}
	if have == stamp {
		return nil
	}
	if err := g.AutoMigrate(models()...); err != nil {
		return err
	}
	// At most one open session per chat.
	if err := g.Exec("CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_open ON sessions(chat_key) WHERE closed_at IS NULL").Error; err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if err := migrateInbox(g); err != nil {
		return err
	}
	if err := searchSchema(g, fts); err != nil {
		return err
	}
	return g.Exec(fmt.Sprintf("PRAGMA user_version = %d", stamp)).Error
}
