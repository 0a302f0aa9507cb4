package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools"
)

// The kinds of rows embedded.
const (
	embedMemory  = "memory"
	embedMessage = "message"
)

// embeddingRow is one row's vector of one model: a memory's (Owner its
// person's user key) or a message's (Owner its chat's key). Vector is
// float32s, little-endian (tools.EncodeVector), normalised. The scan's
// index holds the row ids too, so an owner's vectors are stamped
// (vectorsOf) without reading them.
type embeddingRow struct {
	Kind  string `gorm:"primaryKey;index:idx_embeddings_scan,priority:1"`
	RowID int64  `gorm:"primaryKey;autoIncrement:false;index:idx_embeddings_scan,priority:4"`
	Model string `gorm:"primaryKey;index:idx_embeddings_scan,priority:2"`
	Owner string `gorm:"not null;index:idx_embeddings_scan,priority:3"`
	// RowID is in the scan's index too, which stamps an owner's vectors
	// (vectorsOf) without reading them.
	Vector []byte `gorm:"not null"`
}

func (embeddingRow) TableName() string { return "embeddings" }

// embedMark is the embedding job's cursor: of one kind, for one model,
// the highest row id it has taken.
type embedMark struct {
	Kind    string `gorm:"primaryKey"`
	Model   string `gorm:"primaryKey"`
	Through int64  `gorm:"not null"`
	// Skipped counts the rows the job passed that the provider refused
	// (found by words only); it moves with Through, in one transaction.
	Skipped int64 `gorm:"not null;default:0"`
	// Problem is the job's last failure on this kind, cleared by its next
	// round that fails nothing: kept here, not in one process, so that
	// /status in every process sharing the store says the service fails.
	Problem string `gorm:"not null;default:''"`
}

func (embedMark) TableName() string { return "embed_marks" }

// Meaning is search by meaning: the embedder, and what the embedding job
// and the searches need of it. Given to SetMeaning once, before use.
type Meaning struct {
	Embedder tools.Embedder
	// Model is embeddings.model: the job's cursors are its, and a change
	// of it embeds every row again.
	Model string
	// Keep are the fallbacks' embedding models, whose vectors stay.
	Keep []string
	// BatchSize is how many rows one request takes; default 64.
	BatchSize int
	// MinSimilarity is the cosine from which a row counts as found by
	// meaning.
	MinSimilarity float64
	// Idle is how long the job waits for rows when none are pending and
	// no write woke it (another process's writes); default 1m. Retry is
	// its first wait after a failure, doubling up to 32 times it; default
	// 5s.
	Idle, Retry time.Duration
	// Wait bounds what a search waits for the service (its catch-up and
	// its query) before it searches by words; default 4s.
	Wait time.Duration
	// CacheBytes bounds the vectors kept decoded in memory between
	// searches (vectorsOf); default 64 MiB.
	CacheBytes int64
	Logger     *slog.Logger

	// requests and tokens count the answered requests since start.
	requests, tokens atomic.Int64
	cache            vectorCache
}

// Counted counts an answered embeddings request of tokens, for
// MeaningStatus.
func (m *Meaning) Counted(tokens int) {
	m.requests.Add(1)
	m.tokens.Add(int64(tokens))
}

// Tools is the embedder find_tools ranks with: nil on a nil Meaning
// (embeddings off).
func (m *Meaning) Tools() tools.Embedder {
	if m == nil {
		return nil
	}
	return m.Embedder
}

// MeaningStatus is search by meaning's line of /status and the
// console's overview: the model, how far the job is, what it cost since
// start; "" while embeddings are off.
func (d *DB) MeaningStatus(ctx context.Context, _ chat.Inbound) (string, error) {
	m := d.meaning
	if m == nil {
		return "", nil
	}
	p, err := d.EmbedProgress(ctx)
	if err != nil {
		return "Search by meaning: " + m.Model + "; its progress could not be read.", nil
	}
	line := fmt.Sprintf("Search by meaning: %s, %d of %d memories and messages embedded", p.Model, p.Done, p.Total)
	if p.Total > 0 && p.Done < p.Total {
		line += fmt.Sprintf(" (%d%%; the rest are found by words until then)", p.Done*100/p.Total)
	}
	if p.Problem != "" {
		line += "; the embeddings service is failing, tried again shortly"
	}
	if p.Skipped > 0 {
		line += fmt.Sprintf("; %d refused by the service, found by words only", p.Skipped)
	}
	return line + fmt.Sprintf("; %d requests, %d tokens since start.", m.requests.Load(), m.tokens.Load()), nil
}

// RunEmbeddingsAlone is RunEmbeddings in the one process of those
// sharing the database that holds its lease (ex); its end is logged,
// never returned, as search by words goes on without it. It returns at
// once while embeddings are off.
func (d *DB) RunEmbeddingsAlone(ctx context.Context, ex bridge.Exclusive) error {
	if d.meaning == nil {
		return nil
	}
	if err := ex.Do(ctx, "embeddings", d.RunEmbeddings); err != nil && ctx.Err() == nil {
		d.meaning.Logger.Error("the embedding job stopped; rows written from now on are found by words", "err", err)
	}
	return nil
}

// SetMeaning turns search by meaning on. Call it before anything runs.
func (d *DB) SetMeaning(m *Meaning) {
	m.BatchSize = cmp.Or(m.BatchSize, 64)
	m.Idle = cmp.Or(m.Idle, time.Minute)
	m.Retry = cmp.Or(m.Retry, 5*time.Second)
	m.Wait = cmp.Or(m.Wait, 4*time.Second)
	m.cache = vectorCache{max: cmp.Or(m.CacheBytes, 64<<20), sets: map[vectorKey]*vectorSet{}}
	if m.Logger == nil {
		m.Logger = slog.Default()
	}
	d.meaning, d.wake = m, make(chan struct{}, 1)
}

// nudge tells the embedding job that rows were written.
func (d *DB) nudge() {
	if d.wake != nil {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// EmbedProgress is how far the embedding job is: rows taken of all
// there are to embed, and why it is waiting, if it is.
type EmbedProgress struct {
	Model       string
	Done, Total int64
	// Skipped counts rows the provider refused while it embedded others
	// (found by words only).
	Skipped int64
	// Problem is the last failure, cleared by the next success.
	Problem string
}

// EmbedProgress reads the job's progress: the zero value while
// embeddings are off.
func (d *DB) EmbedProgress(ctx context.Context) (EmbedProgress, error) {
	m := d.meaning
	if m == nil {
		return EmbedProgress{}, nil
	}
	p := EmbedProgress{Model: m.Model}
	for _, k := range []string{embedMemory, embedMessage} {
		through, err := d.embedMark(ctx, k)
		if err != nil {
			return p, err
		}
		var done, total int64
		err = d.db.WithContext(ctx).Raw(`SELECT COALESCE(SUM(CASE WHEN id <= ? THEN 1 ELSE 0 END), 0), count(*) FROM `+embedSource(k), through).Row().Scan(&done, &total)
		if err != nil {
			return p, kind(err)
		}
		p.Done, p.Total = p.Done+done, p.Total+total
	}
	// Read after the cursors: a skipped row read as done (its cursor
	// moved with its count, in one transaction) is in Skipped.
	if err := d.db.WithContext(ctx).Raw(`SELECT COALESCE(SUM(skipped), 0), COALESCE(MAX(problem), '') FROM embed_marks WHERE model = ?`, m.Model).Row().Scan(&p.Skipped, &p.Problem); err != nil {
		return p, kind(err)
	}
	return p, nil
}

// embedSource is the rows of kind k that are embedded, as a FROM clause
// with columns id, owner, payer (the person charged) and text.
func embedSource(k string) string {
	if k == embedMemory {
		return `(SELECT id, user_key AS owner, user_key AS payer, '' AS chat, text FROM memories) r`
	}
	return `(SELECT m.id, s.chat_key AS owner, m.user_key AS payer, s.chat_key AS chat, m.text FROM messages m JOIN sessions s ON s.id = m.session_id
		WHERE m.role IN ('user', 'assistant') AND m.text <> '') r`
}

func (d *DB) embedMark(ctx context.Context, k string) (int64, error) {
	var marks []embedMark
	if err := d.db.WithContext(ctx).Where("kind = ? AND model = ?", k, d.meaning.Model).Find(&marks).Error; err != nil {
		return 0, kind(err)
	}
	if len(marks) == 0 {
		return 0, nil
	}
	return marks[0].Through, nil
}

// RunEmbeddings is the embedding job: it embeds the memories and
// messages not yet embedded with the configured model, oldest first, a
// batch at a time, and keeps doing so as rows are written, until ctx
// ends. Its cursor is in the store, so it resumes where it stopped after
// a restart; a new model starts it from the first row (the vectors of
// models no longer configured are dropped first). A provider failing is
// retried with a growing wait; a row it refuses while it embeds others is
// skipped, and found by words only. It returns nil when ctx ends; run it
// in one process of those sharing a database.
func (d *DB) RunEmbeddings(ctx context.Context) error {
	m := d.meaning
	if m == nil {
		return nil
	}
	keep := append([]string{m.Model}, m.Keep...)
	if err := d.db.WithContext(ctx).Where("model NOT IN ?", keep).Delete(&embeddingRow{}).Error; err != nil && ctx.Err() == nil {
		return fmt.Errorf("drop the vectors of other models: %w", kind(err))
	}
	if err := d.db.WithContext(ctx).Where("model <> ?", m.Model).Delete(&embedMark{}).Error; err != nil && ctx.Err() == nil {
		return fmt.Errorf("drop the cursors of other models: %w", kind(err))
	}
	wait := m.Retry
	for ctx.Err() == nil {
		more, err := d.EmbedPending(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			m.Logger.Warn("embedding rows failed; trying again later", "model", m.Model, "in", wait, "err", err)
			if !sleep(ctx, wait, nil) {
				return nil
			}
			wait = min(2*wait, 32*m.Retry)
			continue
		}
		wait = m.Retry
		if !more {
			sleep(ctx, m.Idle, d.wake)
		}
	}
	return nil
}

// sleep waits d, or until wake says something or ctx ends (false).
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}

// pendingRow is a row to embed.
type pendingRow struct {
	ID                 int64
	Owner, Payer, Chat string
	Text               string
}

// EmbedPending embeds one batch of each kind's rows past the cursor and
// moves the cursor past them; more is set when rows remain. Rows are
// asked for together by whom they are charged to (the person, in the
// chat). When a group fails, each of its rows is tried alone: a row
// refused while others are embedded is skipped; when none is embedded the
// provider is down, the cursor stays before the group, and the error is
// returned.
func (d *DB) EmbedPending(ctx context.Context) (more bool, err error) {
	m := d.meaning
	for _, k := range []string{embedMemory, embedMessage} {
		through, err := d.embedMark(ctx, k)
		if err != nil {
			return false, err
		}
		var rows []pendingRow
		if err := d.db.WithContext(ctx).Raw(`SELECT id, owner, payer, chat, text FROM `+embedSource(k)+` WHERE id > ?
			AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.kind = ? AND e.row_id = r.id AND e.model = ?) ORDER BY id LIMIT ?`,
			through, k, m.Model, m.BatchSize).Scan(&rows).Error; err != nil {
			return false, kind(err)
		}
		if len(rows) == 0 {
			// What is left past the cursor was embedded by a search's
			// catch-up: the cursor moves to the last row.
			var last int64
			if err := d.db.WithContext(ctx).Raw(`SELECT COALESCE(MAX(id), 0) FROM ` + embedSource(k)).Row().Scan(&last); err != nil {
				return false, kind(err)
			}
			if last > through {
				if err := d.saveVectors(ctx, k, nil, last, 0, ""); err != nil {
					return false, err
				}
			}
			continue
		}
		more = more || len(rows) == m.BatchSize
		var vecs []embeddingRow
		stop := rows[len(rows)-1].ID // the cursor's next place
		var failure error
		var refused []int64
		embedded := 0
		for _, g := range byPayer(rows) {
			got, err := d.embedRows(ctx, k, g)
			if err != nil {
				var skipped []int64
				got, skipped, err = d.embedAlone(ctx, k, g, err)
				refused = append(refused, skipped...)
			}
			if err != nil {
				failure = err
				stop = min(stop, g[0].ID-1)
				continue
			}
			embedded += len(got)
			vecs = append(vecs, got...)
		}
		if ctx.Err() != nil {
			return false, nil
		}
		if failure == nil && slices.ContainsFunc(vecs, func(v embeddingRow) bool { return v.Model != m.Model }) {
			// A fallback answered: its vectors are kept (its queries find
			// them), and the cursor stays, for the configured model.
			stop, failure = through, fmt.Errorf("%w: %s failed and a fallback's model answered", tools.ErrEmbedding, m.Model)
		}
		// Counted are the rows refused that the cursor passes; those
		// after it are tried again.
		skipped := 0
		for _, id := range refused {
			if id <= stop {
				skipped++
			}
		}
		if skipped > 0 {
			m.Logger.Warn("the embeddings provider refused rows; they are found by words only", "kind", k, "refused", skipped)
		}
		problem := ""
		if failure != nil {
			problem = failure.Error()
		}
		if err := d.saveVectors(ctx, k, vecs, stop, skipped, problem); err != nil {
			return false, err
		}
		if failure != nil {
			return false, failure
		}
	}
	return more, nil
}

// byPayer groups rows by who is charged for them, in the order of their
// first rows.
func byPayer(rows []pendingRow) [][]pendingRow {
	idx := map[[2]string]int{}
	var out [][]pendingRow
	for _, r := range rows {
		key := [2]string{r.Payer, r.Chat}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// embedRows embeds rows of kind k, charged to their payer.
func (d *DB) embedRows(ctx context.Context, k string, rows []pendingRow) ([]embeddingRow, error) {
	texts := make([]string, len(rows))
	for i, r := range rows {
		texts[i] = r.Text
	}
	cctx := tools.WithCaller(ctx, tools.Caller{UserKey: rows[0].Payer, ChatKey: rows[0].Chat})
	v, err := d.meaning.Embedder.Embed(cctx, texts)
	if err != nil {
		return nil, err
	}
	if len(v.Vectors) != len(rows) {
		return nil, fmt.Errorf("%w: %d vectors for %d rows", tools.ErrEmbedding, len(v.Vectors), len(rows))
	}
	out := make([]embeddingRow, len(rows))
	for i, r := range rows {
		out[i] = embeddingRow{Kind: k, RowID: r.ID, Model: v.Model, Owner: r.Owner, Vector: tools.EncodeVector(v.Vectors[i])}
	}
	return out, nil
}

// embedAlone embeds g's rows one at a time, after the provider failed
// them together with err (a lone row is not asked again). A row whose
// text the provider refuses (tools.ErrEmbeddingRefused), or that fails
// while others of g are embedded, is skipped: found by words only. It
// returns the rows embedded and the ids of those skipped; when none is
// embedded and a failure is not a refusal, the provider is down: that
// error is returned.
func (d *DB) embedAlone(ctx context.Context, k string, g []pendingRow, err error) ([]embeddingRow, []int64, error) {
	var got []embeddingRow
	var skipped []int64
	var down error
	for _, r := range g {
		one, e := []embeddingRow(nil), err
		if len(g) > 1 {
			one, e = d.embedRows(ctx, k, []pendingRow{r})
		}
		switch {
		case e == nil:
			got = append(got, one...)
			continue
		case !errors.Is(e, tools.ErrEmbeddingRefused):
			down = e
		}
		skipped = append(skipped, r.ID)
	}
	if down != nil && len(got) == 0 {
		return nil, nil, down
	}
	return got, skipped, nil
}

// saveVectors writes vecs, moves kind k's cursor to through (never back)
// and counts skipped more rows refused, in one transaction.
func (d *DB) saveVectors(ctx context.Context, k string, vecs []embeddingRow, through int64, skipped int, problem string) error {
	return kind(d.db.WithContext(context.WithoutCancel(ctx)).Transaction(func(tx *gorm.DB) error {
		if len(vecs) > 0 {
			if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(vecs, 100).Error; err != nil {
				return err
			}
		}
		mark := embedMark{Kind: k, Model: d.meaning.Model, Through: through, Skipped: int64(skipped), Problem: problem}
		return tx.Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "kind"}, {Name: "model"}},
			DoUpdates: clause.Set{
				{Column: clause.Column{Name: "through"}, Value: gorm.Expr("CASE WHEN embed_marks.through > excluded.through THEN embed_marks.through ELSE excluded.through END")},
				{Column: clause.Column{Name: "skipped"}, Value: gorm.Expr("embed_marks.skipped + excluded.skipped")},
				{Column: clause.Column{Name: "problem"}, Value: gorm.Expr("excluded.problem")},
			},
		}).Create(&mark).Error
	}))
}

// catchUp embeds owner's rows of kind k the job has not reached yet (at
// most catchUpRows of them, the newest), so that a search finds by meaning what was
// written a moment ago; the job's cursor stays, and the job skips them.
// It returns the embedder's failure, if any; other failures are left to
// the job.
func (d *DB) catchUp(ctx context.Context, k, owner string) error {
	m := d.meaning
	through, err := d.embedMark(ctx, k)
	if err != nil {
		return nil
	}
	var rows []pendingRow
	if err := d.db.WithContext(ctx).Raw(`SELECT id, owner, payer, chat, text FROM `+embedSource(k)+` WHERE owner = ? AND id > ?
		AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.kind = ? AND e.row_id = r.id AND e.model = ?) ORDER BY id DESC LIMIT ?`,
		owner, through, k, m.Model, catchUpRows).Scan(&rows).Error; err != nil || len(rows) == 0 {
		return nil
	}
	var vecs []embeddingRow
	for _, g := range byPayer(rows) {
		got, err := d.embedRows(ctx, k, g)
		if errors.Is(err, tools.ErrEmbeddingRefused) {
			// A text refused is the job's to skip (and count); the search
			// goes on with the others.
			got, _, err = d.embedAlone(ctx, k, g, err)
		}
		if err != nil {
			return err
		}
		vecs = append(vecs, got...)
	}
	if err := kind(d.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(vecs, 100).Error); err != nil {
		m.Logger.Warn("a search could not keep the vectors it made", "err", err)
	}
	return nil
}

// catchUpRows bounds what one search embeds before it searches.
const catchUpRows = 256

// byMeaning ranks the rows of kind k owned by owner by their vectors'
// cosine with query's, best first, keeping those from MinSimilarity, at
// most limit: an exact scan of every vector of the owner (vectorsOf).
// The caller reads the rows again with the owner's key. It returns the ids
// and how meaning took part: tools.MeaningUnavailable (no ids) when the
// query could not be embedded.
func (d *DB) byMeaning(ctx context.Context, k, owner, query string, limit int) ([]int64, tools.Meaning, error) {
	m := d.meaning
	if m == nil {
		return nil, tools.MeaningOff, nil
	}
	// A service that hangs leaves the search to words in good time.
	ectx, cancel := context.WithTimeout(ctx, m.Wait)
	defer cancel()
	var v tools.Vectors
	err := d.catchUp(ectx, k, owner)
	if err == nil {
		v, err = m.Embedder.Embed(ectx, []string{query})
	}
	if err != nil || len(v.Vectors) != 1 {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		m.Logger.Warn("a search could not embed its query; it searched by words only", "err", err)
		return nil, tools.MeaningUnavailable, nil
	}
	q := v.Vectors[0]
	set, err := d.vectorsOf(ctx, vectorKey{k, v.Model, owner})
	if err != nil {
		return nil, "", err
	}
	type scored struct {
		id  int64
		sim float32
	}
	var best []scored
	for i, id := range set.ids {
		sim := tools.Dot(q, set.vecs[i*set.dims:(i+1)*set.dims])
		if float64(sim) < m.MinSimilarity {
			continue
		}
		// The best limit, kept sorted: insertion into a short list.
		if len(best) == limit && sim <= best[len(best)-1].sim {
			continue
		}
		j, _ := slices.BinarySearchFunc(best, sim, func(s scored, t float32) int {
			if s.sim > t {
				return -1
			}
			return 1
		})
		best = slices.Insert(best, j, scored{id, sim})
		if len(best) > limit {
			best = best[:limit]
		}
	}
	ids := make([]int64, len(best))
	for i, s := range best {
		ids[i] = s.id
	}
	return ids, tools.MeaningUsed, nil
}
