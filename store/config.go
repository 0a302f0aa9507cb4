package store

import (
	"fmt"
	"path/filepath"

	"loadout/config"
)

// Config is the store section: a SQLite file (the default) or a
// PostgreSQL server.
type Config struct {
	// Driver is "sqlite" (default) or "postgres".
	Driver string `yaml:"driver"`
	// Path is the SQLite file; with postgres, workspace files and the
	// console's history still go beside it.
	Path string `yaml:"path"`
	// DSN is the PostgreSQL connection URL.
	DSN string `yaml:"dsn" secret:"url"`
}

// Open opens the configured database; an error names the key to fix.
// For SQLite it first checks that this process can write the file's
// directory, and the file when it exists, and says how to fix it when
// it cannot.
func (c Config) Open() (*DB, error) {
	if c.Driver == "postgres" {
		db, err := OpenPostgres(c.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w (store.dsn)", err)
		}
		return db, nil
	}
	// Checked first: SQLite opens a file it cannot write read-only, and
	// only the first write fails, as "attempt to write a readonly
	// database".
	if Available {
		if err := checkWritable(c.Path); err != nil {
			return nil, err
		}
	}
	db, err := Open(c.Path)
	if err != nil {
		return nil, fmt.Errorf("%w (store.path)", err)
	}
	return db, nil
}

// Dir is where files kept beside the store go (the chats' files, the
// journals of sent parts, the console's history): the SQLite file's
// directory, "" for a store in memory.
func (c Config) Dir() string {
	if c.Path == "" || c.Path == ":memory:" {
		return ""
	}
	return filepath.Dir(c.Path)
}

// Check checks the store section.
func (c Config) Check(ch *config.Checker) {
	if c.Path == "" {
		ch.Bad("path", "must not be empty")
	}
	switch c.Driver {
	case "", "sqlite":
	case "postgres":
		if c.DSN == "" {
			ch.Bad("dsn", "must be set with store.driver postgres, e.g. postgres://loadout@127.0.0.1:5432/loadout")
		}
	default:
		ch.Bad("driver", `must be "sqlite" or "postgres", got %q`, c.Driver)
	}
}
