package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// OpenPostgres opens the PostgreSQL database dsn (a postgres:// URL or
// key=value string) and migrates its schema unless its stamp says it is
// there already. Several processes may start on one schema at once:
// migration runs under an advisory lock of the schema.
func OpenPostgres(dsn string) (*DB, error) {
	g, err := gorm.Open(postgres.Open(dsn), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("store: open PostgreSQL: %w", err)
	}
	if sqlDB, err := g.DB(); err == nil {
		sqlDB.SetMaxOpenConns(pgConns)
		sqlDB.SetMaxIdleConns(pgConns)
	}
	schema, key, err := preparePostgres(g)
	if err != nil {
		if sqlDB, err := g.DB(); err == nil {
			sqlDB.Close()
		}
		return nil, fmt.Errorf("store: %w", err)
	}
	return &DB{db: g, pg: true, schema: schema, now: utcNow, sig: newSignals(dsn, noticeChannel(schema), key)}, nil
}

// preparePostgres names the current schema, migrates it and reads its
// key for signing notices.
func preparePostgres(g *gorm.DB) (schema string, key []byte, err error) {
	if err := g.Raw("SELECT current_schema()").Scan(&schema).Error; err != nil {
		return "", nil, fmt.Errorf("read the schema of PostgreSQL: %w", err)
	}
	if schema == "" {
		return "", nil, errors.New("PostgreSQL: no schema of the search path exists")
	}
	if err := migratePostgres(g, schema); err != nil {
		return "", nil, fmt.Errorf("migrate PostgreSQL: %w", err)
	}
	if key, err = noticeKey(g); err != nil {
		return "", nil, fmt.Errorf("set up the notices of PostgreSQL: %w", err)
	}
	return schema, key, nil
}

// pgConns bounds the connections to PostgreSQL, which, unlike SQLite,
// runs writers side by side.
const pgConns = 16

// migratePostgres brings the schema to this build's, unless its stamp
// (schemaStamp, kept in the schema_stamp table) says it is there
// already, under an advisory lock of the schema, so replicas starting
// together migrate one after the other and the later ones find the
// stamp in place. Schemas of one database migrate side by side.
func migratePostgres(g *gorm.DB, schema string) error {
	stamp := schemaStamp(true)
	return g.Connection(func(c *gorm.DB) error {
		c = c.Session(&gorm.Session{NewDB: true}) // each statement fresh, on this connection
		if have, err := pgStamp(c); err != nil || have == stamp {
			return err
		}
		lock := advisoryKey(schema, "loadout migrate")
		if err := c.Exec("SELECT pg_advisory_lock(?)", lock).Error; err != nil {
			return err
		}
		defer c.Exec("SELECT pg_advisory_unlock(?)", lock)
		if have, err := pgStamp(c); err != nil || have == stamp {
			return err // another process migrated it meanwhile
		}
		if err := migrateMessages(c); err != nil {
			return err
		}
		if err := c.AutoMigrate(models()...); err != nil {
			return err
		}
		if err := c.Transaction(moveHeldStates); err != nil {
			return fmt.Errorf("move the held messages: %w", err)
		}
		// The loaded-groups query reads ids too: the index carries them,
		// as SQLite's does (its rowid), so the query never visits rows.
		var def string
		if err := c.Raw(`SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'idx_messages_loaded'`).Scan(&def).Error; err != nil {
			return err
		}
		if !strings.Contains(def, "INCLUDE") {
			if err := c.Exec(`DROP INDEX IF EXISTS idx_messages_loaded`).Error; err != nil {
				return err
			}
			if err := c.Exec(`CREATE INDEX idx_messages_loaded ON messages (session_id, tool_name, status, group_changes) INCLUDE (id)`).Error; err != nil {
				return err
			}
		}
		for _, s := range append([]string{
			// At most one open session per chat.
			`CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_open ON sessions(chat_key) WHERE closed_at IS NULL`,
			`CREATE INDEX IF NOT EXISTS idx_inbox_open ON inbox_items(channel, seq) WHERE state IN ('pending', 'answered')`,
			unattendedTasks,
			waitingQuestions,
			// Full-text search: a generated tsvector column with a GIN
			// index, what FTS5 is on SQLite.
			`ALTER TABLE memories ADD COLUMN IF NOT EXISTS text_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED`,
			`CREATE INDEX IF NOT EXISTS idx_memories_tsv ON memories USING GIN (text_tsv)`,
			`ALTER TABLE messages ADD COLUMN IF NOT EXISTS text_tsv tsvector GENERATED ALWAYS AS (
				CASE WHEN role IN ('user', 'assistant') THEN to_tsvector('simple', text) END) STORED`,
			`CREATE INDEX IF NOT EXISTS idx_messages_tsv ON messages USING GIN (text_tsv)`,
			// The audit trail is append-only.
			pgAuditGuardFunc, pgAuditGuardTrigger,
		}, personIndexes...) {
			if err := c.Exec(s).Error; err != nil {
				return err
			}
		}
		return c.Transaction(func(tx *gorm.DB) error {
			for _, s := range []string{`CREATE TABLE IF NOT EXISTS schema_stamp (stamp integer NOT NULL)`, `DELETE FROM schema_stamp`} {
				if err := tx.Exec(s).Error; err != nil {
					return err
				}
			}
			return tx.Exec(`INSERT INTO schema_stamp (stamp) VALUES (?)`, stamp).Error
		})
	})
}

// pgStamp is the schema's stamp: 0 before its first migration.
func pgStamp(c *gorm.DB) (int32, error) {
	var table *string
	if err := c.Raw(`SELECT to_regclass('schema_stamp')::text`).Scan(&table).Error; err != nil || table == nil {
		return 0, err
	}
	var stamp int32
	err := c.Raw(`SELECT stamp FROM schema_stamp`).Scan(&stamp).Error
	return stamp, err
}

// pgTransient reports a PostgreSQL error that may pass when tried again:
// a serialization failure, a deadlock, a connection lost or refused.
func pgTransient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "57P03", "53300":
			return true
		}
		return len(pe.Code) == 2+3 && pe.Code[:2] == "08"
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.Is(err, context.DeadlineExceeded)
}
