// Package storetest builds, for tests, a chat engine on a real store (a
// temporary SQLite file, or PostgreSQL with LOADOUT_TEST_DSN set) and the
// scripted model server of chattest. It lives beside store rather than in
// chat/chattest so that nothing under chat imports store.
package storetest

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store"
	"loadout/tools"
)

// Env is an engine wired to a chattest.ModelServer and a store on a temp file.
type Env struct {
	Model    *chattest.ModelServer
	Store    *store.DB
	Registry *tools.Registry
	Engine   *chat.Engine
	DBPath   string
}

// Options configure NewEnv.
type Options struct {
	// Config is the engine configuration; Logger defaults to discarding.
	Config chat.Config
	// Register adds tools and groups beyond load_tool_group.
	Register func(r *tools.Registry) error
	// DBPath reuses a database file (for restart tests); default a new
	// file in t.TempDir().
	DBPath string
	// Model reuses a model server.
	Model *chattest.ModelServer
}

// NewEnv builds an Env; everything is closed when the test ends.
func NewEnv(t testing.TB, o Options) *Env {
	t.Helper()
	if o.DBPath == "" {
		o.DBPath = filepath.Join(t.TempDir(), "loadout.db")
	}
	if o.Model == nil {
		o.Model = chattest.NewModelServer(t)
	}
	if o.Config.Logger == nil {
		o.Config.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	db, err := store.OpenTest(o.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if o.Config.Ledger == nil && (o.Config.Limits.Capped() || len(o.Config.Prices) > 0) {
		// Caps and prices count in the store, as cmd wires them.
		o.Config.Ledger = db
	}
	reg := tools.NewRegistry()
	if err := reg.Add(tools.LoadGroup(reg)); err != nil {
		t.Fatal(err)
	}
	if o.Register != nil {
		if err := o.Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	return &Env{
		Model:    o.Model,
		Store:    db,
		Registry: reg,
		Engine:   chat.New(o.Config, o.Model.Client(), db, reg),
		DBPath:   o.DBPath,
	}
}
