package store

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/tools"
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

// refusing turns search by meaning on in db with a fake that refuses
// texts with "poison", and saves memories of telegram:1.
func refusing(t *testing.T, db *DB, memories ...string) (*DB, *chattest.EmbeddingsServer) {
	t.Helper()
	fake := chattest.NewEmbeddingsServer(t)
	withMeaning(t, db, fake, "fake-embed")
	fake.Refuse("poison")
	for _, text := range memories {
		if _, err := db.SaveMemory(context.Background(), "telegram:1", text); err != nil {
			t.Fatal(err)
		}
	}
	return db, fake
}

// The count of rows refused is kept with the job's place in the store:
// a restart (or another process's /status) reads it as it was.
func TestTheRefusedCountOutlivesARestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	refusing(t, db, "a poison pill text", "My physician is Dr. Ruiz")
	db = embedAllAndReopen(t, db, path)
	withMeaning(t, db, chattest.NewEmbeddingsServer(t), "fake-embed")
	if p, err := db.EmbedProgress(ctx); err != nil || p.Skipped != 1 || p.Done != 2 {
		t.Fatalf("after a restart: %+v, %v", p, err)
	}
}

// embedAllAndReopen runs db's job until every row is taken, closes db and
// opens path again, closed when the test ends.
func embedAllAndReopen(t *testing.T, db *DB, path string) *DB {
	t.Helper()
	embedAll(t, db)
	db.Close()
	return openAt(t, path)
}

// embedAll runs db's job until every row is taken.
func embedAll(t *testing.T, db *DB) {
	t.Helper()
	for more := true; more; {
		var err error
		if more, err = db.EmbedPending(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs db's embedding job until the test ends.
func run(t *testing.T, db *DB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); db.RunEmbeddings(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// caughtUp waits for the job to have taken every row.
func caughtUp(t *testing.T, db *DB) EmbedProgress {
	t.Helper()
	var p EmbedProgress
	chattest.Eventually(t, "the embedding job to catch up", func() bool {
		var err error
		p, err = db.EmbedProgress(context.Background())
		return err == nil && p.Total > 0 && p.Done == p.Total
	})
	return p
}

// A memory said in other words is found by meaning, and not by its
// words; by words only, it is not.
func TestMemoryFoundByMeaning(t *testing.T) {
	ctx := context.Background()
	words := open(t)
	db := open(t)
	withMeaning(t, db, chattest.NewEmbeddingsServer(t), "fake-embed")
	for _, d := range []*DB{words, db} {
		d.SaveMemory(ctx, "telegram:1", "My physician is Dr. Ruiz")
		d.SaveMemory(ctx, "telegram:1", "I like green tea in the morning")
		d.SaveMemory(ctx, "telegram:2", "My doctor is Dr. Bell") // another person's
	}
	if f, err := words.SearchMemories(ctx, "telegram:1", "doctor", 10); err != nil || len(f.Memories) != 0 || f.Meaning != tools.MeaningOff {
		t.Fatalf("by words, the paraphrase found %+v %v", f, err)
	}
	f, err := db.SearchMemories(ctx, "telegram:1", "doctor", 10)
	if err != nil || len(f.Memories) != 1 || f.Memories[0].Text != "My physician is Dr. Ruiz" || f.Meaning != tools.MeaningUsed {
		t.Fatalf("by meaning: %+v %v", f, err)
	}
	// A question with common words: the one by meaning first, and never
	// the other person's.
	f, err = db.SearchMemories(ctx, "telegram:1", "who is my doctor", 10)
	if err != nil || len(f.Memories) == 0 || f.Memories[0].Text != "My physician is Dr. Ruiz" {
		t.Fatalf("the question: %+v %v", f, err)
	}
	for _, m := range f.Memories {
		if strings.Contains(m.Text, "Bell") {
			t.Errorf("another person's memory found: %+v", f)
		}
	}
	// Words and meaning together: the exact word still comes first.
	f, _ = db.SearchMemories(ctx, "telegram:1", "green tea", 10)
	if len(f.Memories) == 0 || f.Memories[0].Text != "I like green tea in the morning" {
		t.Errorf("by words and meaning: %+v", f)
	}
}

// History search finds a message said in other words, in this chat
// only.
func TestHistoryFoundByMeaning(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	withMeaning(t, db, chattest.NewEmbeddingsServer(t), "fake-embed")
	for _, c := range []struct{ chat, text string }{{"telegram:1", "We booked the flat in Lisbon for the vacation"}, {"telegram:2", "the holiday apartment in Rome"}} {
		s, _ := db.OpenSession(ctx, c.chat)
		if err := db.Append(ctx, s.ID, []chat.Message{{Role: chat.RoleUser, Text: c.text}}, chat.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := db.SearchHistory(ctx, "telegram:1", "holiday apartment", 10)
	if err != nil || len(f.Hits) != 1 || !strings.Contains(f.Hits[0].Snippet, "Lisbon") || f.Meaning != tools.MeaningUsed {
		t.Fatalf("found %+v %v", f, err)
	}
}

// With the provider down a search runs by words and says so; the rows
// written meanwhile are embedded once it is back.
func TestSearchFallsBackToWordsWhenTheProviderFails(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	fake := chattest.NewEmbeddingsServer(t)
	withMeaning(t, db, fake, "fake-embed")
	fake.Fail(true)
	db.SaveMemory(ctx, "telegram:1", "My physician is Dr. Ruiz")
	f, err := db.SearchMemories(ctx, "telegram:1", "physician", 10)
	if err != nil || len(f.Memories) != 1 || f.Meaning != tools.MeaningUnavailable {
		t.Fatalf("by words with the provider down: %+v %v", f, err)
	}
	if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 0 || f.Meaning != tools.MeaningUnavailable {
		t.Fatalf("the paraphrase with the provider down: %+v", f)
	}
	if _, err := db.EmbedPending(ctx); err == nil {
		t.Fatal("the job took rows the provider did not embed")
	}
	if p, _ := db.EmbedProgress(ctx); p.Done != 0 || p.Total != 1 || p.Problem == "" {
		t.Errorf("progress with the provider down: %+v", p)
	}
	fake.Fail(false)
	run(t, db)
	caughtUp(t, db)
	if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 1 {
		t.Errorf("once the provider is back: %+v", f)
	}
}

// A service that hangs leaves a search to words once Meaning.Wait is
// up, saying so.
func TestASearchDoesNotWaitForAHangingService(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	fake := chattest.NewEmbeddingsServer(t)
	m := withMeaning(t, db, fake, "fake-embed")
	m.Wait = 50 * time.Millisecond
	db.SaveMemory(ctx, "telegram:1", "My physician is Dr. Ruiz")
	fake.HoldAfter(0)
	defer fake.Release()
	f, err := db.SearchMemories(ctx, "telegram:1", "physician", 10)
	if err != nil || len(f.Memories) != 1 || f.Meaning != tools.MeaningUnavailable {
		t.Fatalf("with the service hanging: %+v %v", f, err)
	}
}

// A row the provider refuses while it embeds the others is skipped: the
// job does not stall on it, and it is found by words.
func TestARefusedRowIsSkipped(t *testing.T) {
	ctx := context.Background()
	db, fake := refusing(t, open(t), "a poison pill text", "My physician is Dr. Ruiz")
	run(t, db)
	if p := caughtUp(t, db); p.Skipped != 1 {
		t.Errorf("progress %+v", p)
	}
	fake.Refuse("")
	if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 1 {
		t.Errorf("by meaning: %+v", f)
	}
}

// The job keeps its place in the store: stopped half way (the handle
// closed, as a process killed leaves it), it resumes where it stopped
// and embeds no row twice.
func TestEmbeddingJobResumesAfterARestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	fake := chattest.NewEmbeddingsServer(t)
	for i := range 150 {
		if _, err := db.SaveMemory(ctx, "telegram:1", fmt.Sprintf("fact number %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	withMeaning(t, db, fake, "fake-embed")
	if more, err := db.EmbedPending(ctx); err != nil || !more {
		t.Fatalf("one batch: more %v, %v", more, err)
	}
	if p, _ := db.EmbedProgress(ctx); p.Done != 64 || p.Total != 150 {
		t.Fatalf("after one batch: %+v", p)
	}
	db.Close()
	db, err = OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	withMeaning(t, db, fake, "fake-embed")
	run(t, db)
	caughtUp(t, db)
	if n := fake.Texts(); n != 150 {
		t.Errorf("%d texts embedded for 150 rows", n)
	}
}

// A new model embeds every row again, drops the old model's vectors, and
// its searches compare only its own.
func TestAModelChangeReembeds(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	fake := chattest.NewEmbeddingsServer(t)
	withMeaning(t, db, fake, "model-a")
	db.SaveMemory(ctx, "telegram:1", "My physician is Dr. Ruiz")
	db = embedAllAndReopen(t, db, path)
	withMeaning(t, db, fake, "model-b")
	if p, _ := db.EmbedProgress(ctx); p.Done != 0 || p.Total != 1 {
		t.Errorf("the new model's progress: %+v", p)
	}
	run(t, db)
	caughtUp(t, db)
	var models []string
	db.db.Model(&embeddingRow{}).Distinct("model").Pluck("model", &models)
	if len(models) != 1 || models[0] != "model-b" {
		t.Errorf("vectors of %v", models)
	}
	if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 1 || f.Meaning != tools.MeaningUsed {
		t.Errorf("by the new model: %+v", f)
	}
}

// When a fallback embeds for the job, its vectors are kept under its own
// model and the cursor stays: the configured model embeds those rows once
// it is back.
func TestAFallbacksVectorsDoNotMoveTheCursor(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	primary, spare := chattest.NewEmbeddingsServer(t), chattest.NewEmbeddingsServer(t)
	m := withMeaning(t, db, primary, "main-embed")
	m.Embedder = primary.Client("main-embed", openai.EmbedOptions{Fallbacks: []openai.Fallback{{BaseURL: spare.URL + "/v1", EmbeddingModel: "spare-embed"}}})
	db.SaveMemory(ctx, "telegram:1", "My physician is Dr. Ruiz")
	primary.Fail(true)
	if _, err := db.EmbedPending(ctx); err == nil {
		t.Fatal("the job took the fallback's vectors as the model's")
	}
	if p, _ := db.EmbedProgress(ctx); p.Done != 0 {
		t.Errorf("the cursor moved: %+v", p)
	}
	if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 1 || f.Meaning != tools.MeaningUsed {
		t.Errorf("by the fallback's model: %+v", f)
	}
	primary.Fail(false)
	if _, err := db.EmbedPending(ctx); err != nil {
		t.Fatal(err)
	}
	var n int64
	db.db.Model(&embeddingRow{}).Where("model = ?", "main-embed").Count(&n)
	if p, _ := db.EmbedProgress(ctx); p.Done != 1 || n != 1 {
		t.Errorf("once the model is back: %+v, %d of its vectors", p, n)
	}
}

// The vectors a search keeps in memory follow the store: a memory saved
// or forgotten after a search is found, or not, by the next; and with
// too little room for them the vectors are read each time.
func TestKeptVectorsFollowTheStore(t *testing.T) {
	for _, room := range []int64{0, 1} {
		ctx := context.Background()
		db := open(t)
		m := withMeaning(t, db, chattest.NewEmbeddingsServer(t), "fake-embed")
		if room > 0 {
			m.cache.max = room
		}
		db.SaveMemory(ctx, "telegram:1", "I like green tea")
		if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 0 {
			t.Fatalf("room %d: found %+v", room, f)
		}
		saved, _ := db.SaveMemory(ctx, "telegram:1", "My physician is Dr. Ruiz")
		if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 1 {
			t.Errorf("room %d: a memory saved after a search: %+v", room, f)
		}
		db.ForgetMemory(ctx, "telegram:1", saved.ID)
		if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 0 {
			t.Errorf("room %d: a forgotten memory: %+v", room, f)
		}
	}
}

// A row the provider refuses, alone in its batch (the last written, or
// the one left when a search embedded the others), is skipped too: the
// job does not take the refusal for the provider being down and stall
// on it; and a search of its person still ranks by meaning.
func TestARefusedRowAloneIsSkipped(t *testing.T) {
	ctx := context.Background()
	db, _ := refusing(t, open(t), "My physician is Dr. Ruiz", "a poison pill text")
	if f, _ := db.SearchMemories(ctx, "telegram:1", "doctor", 10); len(f.Memories) != 1 || f.Meaning != tools.MeaningUsed {
		t.Errorf("a search beside a refused row: %+v", f)
	}
	run(t, db)
	if p := caughtUp(t, db); p.Skipped != 1 || p.Problem != "" {
		t.Errorf("progress %+v", p)
	}
}

// The job alone, with nothing but a refused row to embed, skips it and
// reports no problem (it took the refusal for the provider being down,
// and stalled on the row for good).
func TestTheJobSkipsARefusedRowWithNothingBeside(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	fake := chattest.NewEmbeddingsServer(t)
	withMeaning(t, db, fake, "fake-embed")
	fake.Refuse("poison")
	db.SaveMemory(ctx, "telegram:1", "a poison pill text")
	run(t, db)
	if p := caughtUp(t, db); p.Skipped != 1 || p.Problem != "" {
		t.Errorf("progress %+v", p)
	}
}

// The embedding job's failure is kept in the store: another process
// sharing it (a replica's /status) reads it, and the job's next good
// round clears it for both.
func TestTheJobsFailureIsSeenByEveryProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loadout.db")
	running, other := openAt(t, path), openAt(t, path)
	fake := chattest.NewEmbeddingsServer(t)
	withMeaning(t, running, fake, "fake-embed")
	withMeaning(t, other, fake, "fake-embed")
	fake.Fail(true)
	if _, err := running.SaveMemory(ctx, "telegram:1", "My physician is Dr. Ruiz"); err != nil {
		t.Fatal(err)
	}
	if _, err := running.EmbedPending(ctx); err == nil {
		t.Fatal("the job took rows the provider did not embed")
	}
	if p, err := other.EmbedProgress(ctx); err != nil || p.Problem == "" {
		t.Fatalf("the other process reads %+v, %v: no failure", p, err)
	}
	if line, _ := other.MeaningStatus(ctx, chat.Inbound{}); !strings.Contains(line, "failing") {
		t.Fatalf("the other process's status: %q", line)
	}
	fake.Fail(false)
	embedAll(t, running)
	if p, err := other.EmbedProgress(ctx); err != nil || p.Problem != "" || p.Done != 1 {
		t.Fatalf("after a good round the other process reads %+v, %v", p, err)
	}
}
