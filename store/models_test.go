package store

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

var update = flag.Bool("update", false, "TestModelsSQL: write models.sql from what AutoMigrate creates")

// models.sql is what AutoMigrate creates for the models in a new SQLite
// database; a model changed without it fails here:
//
//	go test -tags sqlite_fts5 -run TestModelsSQL ./store/ -update
func TestModelsSQL(t *testing.T) {
	if !Available {
		t.Skip("no SQLite in this build")
	}
	auto := rawSQLite(t)
	if err := auto.AutoMigrate(models()...); err != nil {
		t.Fatal(err)
	}
	want := schemaOf(t, auto)
	if *update {
		if err := os.WriteFile("models.sql", []byte(strings.Join(want, ";\n")+";\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fresh := rawSQLite(t)
	if err := createTables(fresh); err != nil {
		t.Fatal(err)
	}
	if got := schemaOf(t, fresh); !slices.Equal(got, want) {
		t.Fatalf("models.sql creates\n%s\n\nAutoMigrate creates\n%s\n\nregenerate it: go test -tags sqlite_fts5 -run TestModelsSQL ./store/ -update",
			strings.Join(got, ";\n"), strings.Join(want, ";\n"))
	}
	// On a database with tables, AutoMigrate finds nothing to do.
	if err := createTables(fresh); err != nil {
		t.Fatal(err)
	}
	if got := schemaOf(t, fresh); !slices.Equal(got, want) {
		t.Fatalf("migrating the new database again changed it:\n%s", strings.Join(got, ";\n"))
	}
}

// rawSQLite is a new SQLite database with nothing migrated.
func rawSQLite(t *testing.T) *gorm.DB {
	t.Helper()
	g, err := gorm.Open(sqlite.Open(filepath.Join(t.TempDir(), "x.db")), gormConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if db, err := g.DB(); err == nil {
			db.Close()
		}
	})
	return g
}

// schemaOf is the database's tables and indexes as created, in order of
// kind (tables first) and name.
func schemaOf(t *testing.T, g *gorm.DB) []string {
	t.Helper()
	var sqls []string
	if err := g.Raw(`SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
		ORDER BY type <> 'table', name`).Scan(&sqls).Error; err != nil {
		t.Fatal(err)
	}
	return sqls
}
