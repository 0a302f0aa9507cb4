package store

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"loadout/chat/chattest"
	"loadout/chat/openai"
)

// withMeaning turns search by meaning on in db, with model on the fake
// embeddings server.
func withMeaning(t testing.TB, db *DB, fake *chattest.EmbeddingsServer, model string) *Meaning {
	t.Helper()
	m := &Meaning{Embedder: fake.Client(model, openai.EmbedOptions{}), Model: model, MinSimilarity: openai.DefaultMinSimilarity,
		Retry: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	db.SetMeaning(m)
	return m
}
