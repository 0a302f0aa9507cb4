package store

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

var update = flag.Bool("update", false, "TestSeeds: write store/seed from what migrate makes of an empty database")

// The seeds in store/seed are what migrate makes of an empty database,
// with and without full-text search; a model or a migration changed
// without them fails here:
//
//	go test -tags sqlite_fts5 -run TestSeeds ./store/ -update
func TestSeeds(t *testing.T) {
	if !Available {
		t.Skip("no SQLite in this build")
	}
	for _, fts := range []bool{false, true} {
		t.Run(fmt.Sprintf("fts5=%t", fts), func(t *testing.T) {
			if fts && !hasFTS5() {
				t.Skip("this build has no FTS5 (build with -tags sqlite_fts5)")
			}
			// What migrate makes of an empty file, as a seed.
			made := filepath.Join(t.TempDir(), "made.db")
			g := rawSQLite(t, made)
			if err := migrate(g, fts); err != nil {
				t.Fatal(err)
			}
			want, wantRows := schemaOf(t, g), rowsOf(t, g)
			if *update {
				packed := packSeed(t, g, made)
				if err := os.WriteFile(seedName(fts), packed, 0o644); err != nil {
					t.Fatal(err)
				}
				packedSeed(fts, packed)
			}

			// A new path gets the seed: migrate then finds its stamp and
			// has nothing to do.
			path := filepath.Join(t.TempDir(), "new", "loadout.db")
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := seed(path, fts); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("no seed was put at a new path (%v): regenerate it: go test -tags sqlite_fts5 -run TestSeeds ./store/ -update", err)
			}
			seeded := rawSQLite(t, path)
			var stamp int32
			if err := seeded.Raw("PRAGMA user_version").Scan(&stamp).Error; err != nil {
				t.Fatal(err)
			}
			if stamp != schemaStamp(fts) {
				t.Fatalf("the seed's stamp is %d, this build's %d: regenerate it: go test -tags sqlite_fts5 -run TestSeeds ./store/ -update", stamp, schemaStamp(fts))
			}
			if got := schemaOf(t, seeded); !slices.Equal(got, want) {
				t.Fatalf("the seed holds\n%s\n\nmigrate makes\n%s\n\nregenerate it: go test -tags sqlite_fts5 -run TestSeeds ./store/ -update",
					strings.Join(got, ";\n"), strings.Join(want, ";\n"))
			}
			if got := rowsOf(t, seeded); !slices.Equal(got, wantRows) {
				t.Fatalf("the seed's rows are %v, migrate's %v", got, wantRows)
			}
			// On a database with the tables, AutoMigrate finds nothing to do.
			if err := createTables(seeded); err != nil {
				t.Fatal(err)
			}
			if got := schemaOf(t, seeded); !slices.Equal(got, want) {
				t.Fatalf("migrating the new database again changed it:\n%s", strings.Join(got, ";\n"))
			}
		})
	}
}

// TestSeedLeavesAFileAlone: a path with a file, even an empty one (which
// SQLite takes for a new database), is not written over, and a seed that
// is not this build's schema is not used.
func TestSeedLeavesAFileAlone(t *testing.T) {
	if !Available {
		t.Skip("no SQLite in this build")
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := seed(empty, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("an empty file was written over: %v %v", fi, err)
	}
	old := seedPlain
	t.Cleanup(func() { seedPlain = old })
	image, err := unpack(seedPlain)
	if err != nil {
		t.Fatal(err)
	}
	image[63]++ // another build's stamp
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(image)
	zw.Close()
	seedPlain = buf.Bytes()
	stale := filepath.Join(dir, "stale.db")
	if err := seed(stale, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("a seed with another build's stamp was used")
	}
	// Open builds the schema itself then.
	db, err := Open(stale)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.SetChatSetting(t.Context(), "c", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.new-*")); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// packSeed is the migrated database g at path as a seed: its log folded
// in, compacted, compressed.
func packSeed(t *testing.T, g *gorm.DB, path string) []byte {
	t.Helper()
	for _, q := range []string{"PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"} {
		if err := g.Exec(q).Error; err != nil {
			t.Fatal(q, err)
		}
	}
	if db, err := g.DB(); err == nil {
		db.Close()
	}
	image, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(image)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// packedSeed makes packed the seed this test run uses for fts.
func packedSeed(fts bool, packed []byte) {
	if fts {
		seedFTS5 = packed
	} else {
		seedPlain = packed
	}
}

// seedName is the file in store/seed that holds the seed for fts.
func seedName(fts bool) string {
	if fts {
		return filepath.Join("seed", "fts5.db.gz")
	}
	return filepath.Join("seed", "plain.db.gz")
}

// rawSQLite is the SQLite database at path (a new one in a temporary
// directory for ""), opened as Open does but with nothing migrated.
func rawSQLite(t *testing.T, path string) *gorm.DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "x.db")
	}
	g, err := gorm.Open(sqlite.Open("file:"+path+"?_journal_mode=WAL&_foreign_keys=on"), gormConfig())
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

// schemaOf is the database's tables, indexes, triggers and virtual
// tables as created, in order of kind (tables first) and name.
func schemaOf(t *testing.T, g *gorm.DB) []string {
	t.Helper()
	var sqls []string
	if err := g.Raw(`SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
		ORDER BY type <> 'table', name`).Scan(&sqls).Error; err != nil {
		t.Fatal(err)
	}
	return sqls
}

// rowsOf is every ordinary table's name and row count.
func rowsOf(t *testing.T, g *gorm.DB) []string {
	t.Helper()
	var names []string
	if err := g.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name`).Scan(&names).Error; err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		var rows int64
		if err := g.Raw(`SELECT count(*) FROM "` + n + `"`).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d", n, rows))
	}
	return out
}
