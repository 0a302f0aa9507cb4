package store

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// TestDSNVar names the environment variable that runs the tests against
// PostgreSQL: a server's URL (postgres://user@127.0.0.1:5432/db).
const TestDSNVar = "LOADOUT_TEST_DSN"

// OpenTest opens the store a test asks for at path: with LOADOUT_TEST_DSN
// set, a schema of its own on that PostgreSQL server (the same path gives
// the same schema, so a test can reopen it as after a restart); else the
// SQLite file at path.
func OpenTest(path string) (*DB, error) {
	if os.Getenv(TestDSNVar) == "" {
		return Open(path)
	}
	dsn, err := TestDSN(path)
	if err != nil {
		return nil, err
	}
	return OpenPostgres(dsn)
}

// TestDSN is the LOADOUT_TEST_DSN server with a schema of its own for
// path (created when missing) as the search path.
func TestDSN(path string) (string, error) {
	dsn := os.Getenv(TestDSNVar)
	schema := testSchema(path)
	admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return "", err
	}
	err = admin.Exec("CREATE SCHEMA IF NOT EXISTS " + schema).Error
	if sqlDB, e := admin.DB(); e == nil {
		sqlDB.Close()
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		err = nil // made at the same moment by another opener
	}
	if err != nil {
		return "", fmt.Errorf("store: create test schema: %w", err)
	}
	return withSearchPath(dsn, schema), nil
}

// testSchema is the schema of path's test database.
func testSchema(path string) string {
	h := fnv.New64a()
	h.Write([]byte(path))
	return fmt.Sprintf("t_%x", h.Sum64())
}

// withSearchPath adds search_path=schema to a postgres:// URL or a
// key=value DSN.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " search_path=" + schema
}
