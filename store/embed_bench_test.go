package store

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"loadout/chat/chattest"
	"loadout/tools"
)

var benchWords = flag.Bool("bench.words", false, "BenchmarkSearchMemoriesByMeaning: search by words alone, for comparison")

var benchCache = flag.String("bench.pragma", "", "BenchmarkSearchMemoriesByMeaning: a PRAGMA run first (one connection)")

// randomEmbedder answers random unit vectors of dims numbers: what the
// scan costs does not depend on what they mean.
type randomEmbedder struct {
	dims int
	rng  *rand.Rand
}

func (r *randomEmbedder) Embed(_ context.Context, texts []string) (tools.Vectors, error) {
	out := tools.Vectors{Model: "bench"}
	for range texts {
		v := make([]float32, r.dims)
		for i := range v {
			v[i] = float32(r.rng.NormFloat64())
		}
		out.Vectors = append(out.Vectors, tools.Normalize(v))
	}
	return out, nil
}

// BenchmarkSearchMemoriesByMeaning is one person's memory search by words
// and meaning over n memories, all embedded, with vectors of dims numbers
// (768: nomic-embed-text; 1536: text-embedding-3-small): the query's
// embedding is in-process, so the figure is the store's (the full-text
// query, the exact scan, the fusion).
//
//	go test -tags sqlite_fts5 -run '^$' -bench SearchMemoriesByMeaning ./store/
func BenchmarkSearchMemoriesByMeaning(b *testing.B) {
	for _, dims := range []int{768, 1536} {
		for _, n := range []int{200, 1000, 5000, 10000} {
			b.Run(fmt.Sprintf("dims=%d/rows=%d", dims, n), func(b *testing.B) {
				ctx := context.Background()
				db, err := Open(filepath.Join(b.TempDir(), "x.db"))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				emb := &randomEmbedder{dims: dims, rng: rand.New(rand.NewPCG(1, 2))}
				db.SetMeaning(&Meaning{Embedder: emb, Model: "bench", MinSimilarity: 0.3})
				words := []string{"coffee", "daughter", "birthday", "allergic", "office", "car", "garden", "music", "train", "sister"}
				tx := db.db.Begin()
				for i := range n {
					tx.Exec(`INSERT INTO memories (user_key, text, created_at) VALUES (?, ?, ?)`, "telegram:1",
						fmt.Sprintf("fact %d about the %s and the %s", i, words[i%len(words)], words[(i/7)%len(words)]), db.now())
				}
				if err := tx.Commit().Error; err != nil {
					b.Fatal(err)
				}
				for more := true; more; {
					if more, err = db.EmbedPending(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if *benchCache != "" {
					sqlDB, _ := db.db.DB()
					sqlDB.SetMaxOpenConns(1)
					db.db.Exec(*benchCache)
				}
				if *benchWords {
					db.meaning = nil // the same search by words alone
				}
				b.ResetTimer()
				for range b.N {
					if _, err := db.SearchMemories(ctx, "telegram:1", "when is my sister's birthday", 20); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSaveMemoryWithItsEmbedding is a memory saved and embedded:
// the write, then the job's batch of one over HTTP to the fake
// embeddings server (its vectors: chattest.EmbedDims numbers).
//
//	go test -tags sqlite_fts5 -run '^$' -bench SaveMemoryWithItsEmbedding ./store/
func BenchmarkSaveMemoryWithItsEmbedding(b *testing.B) {
	ctx := context.Background()
	db, err := Open(filepath.Join(b.TempDir(), "x.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	withMeaning(b, db, chattest.NewEmbeddingsServer(b), "fake-embed")
	b.ResetTimer()
	for i := range b.N {
		if _, err := db.SaveMemory(ctx, "telegram:1", fmt.Sprintf("my physician number %d is Dr. Ruiz", i)); err != nil {
			b.Fatal(err)
		}
		if _, err := db.EmbedPending(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
