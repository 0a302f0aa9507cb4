package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"loadout/tools"
	"loadout/tools/history"
	"loadout/tools/memory"
)

var (
	_ memory.Store     = (*DB)(nil)
	_ history.Searcher = (*DB)(nil)
)

// memoryRow is one thing remembered about a person.
type memoryRow struct {
	ID        int64  `gorm:"primaryKey"`
	UserKey   string `gorm:"not null;index:idx_memories_user"`
	Text      string `gorm:"not null"`
	CreatedAt time.Time
}

func (memoryRow) TableName() string { return "memories" }

// ErrNoFTS5 is Open's error for a database that uses full-text search
// opened by a build without it.
var ErrNoFTS5 = errors.New("this database uses full-text search (SQLite FTS5), which this build lacks: build with -tags sqlite_fts5")

// searchSchema creates the full-text indexes of memories and of the
// people's and the assistant's messages and fills them from the rows
// already there. Without FTS5 there are none, and search falls back to a
// scan; a database that has them cannot be used by such a build, since
// their triggers would fail every write.
//
// Memories are indexed by a trigger as they are written. Messages are
// written on every turn, and indexing one at a time cost more than the
// rest of the write, so they are taken in by indexMessages in batches:
// search_marks holds the highest message id the index has seen, and the
// delete trigger only tells the index about rows at or below it (an
// external-content index must never be told to forget a row it lacks).
func searchSchema(g *gorm.DB, fts bool) error {
	var have int64
	if err := g.Raw("SELECT count(*) FROM sqlite_master WHERE name IN ('memories_fts', 'messages_fts')").Scan(&have).Error; err != nil {
		return err
	}
	if !fts {
		if have > 0 {
			return ErrNoFTS5
		}
		return nil
	}
	return g.Transaction(func(tx *gorm.DB) error {
		// Older builds indexed every message by a trigger, so all rows
		// there are in the index.
		var perInsert int64
		if err := tx.Raw("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_ai'").Scan(&perInsert).Error; err != nil {
			return err
		}
		for _, s := range []string{
			`CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(text, content='memories', content_rowid='id', tokenize='unicode61 remove_diacritics 2')`,
			`CREATE TRIGGER IF NOT EXISTS memories_fts_ai AFTER INSERT ON memories BEGIN
				INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text); END`,
			`CREATE TRIGGER IF NOT EXISTS memories_fts_ad AFTER DELETE ON memories BEGIN
				INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text); END`,
			`CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(text, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2')`,
			`CREATE TABLE IF NOT EXISTS search_marks (name TEXT PRIMARY KEY, through INTEGER NOT NULL)`,
			`DROP TRIGGER IF EXISTS messages_fts_ai`,
			`DROP TRIGGER IF EXISTS messages_fts_ad`,
			`CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages
				WHEN old.role IN ('user', 'assistant') AND old.text <> ''
					AND old.id <= (SELECT through FROM search_marks WHERE name = 'messages') BEGIN
				INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text); END`,
		} {
			if err := tx.Exec(s).Error; err != nil {
				return err
			}
		}
		mark := `INSERT OR REPLACE INTO search_marks(name, through) SELECT 'messages', COALESCE(MAX(id), 0) FROM messages`
		switch {
		case have == 0:
			if err := tx.Exec(`INSERT INTO memories_fts(rowid, text) SELECT id, text FROM memories`).Error; err != nil {
				return err
			}
			if err := tx.Exec(`INSERT INTO messages_fts(rowid, text) SELECT id, text FROM messages WHERE role IN ('user', 'assistant') AND text <> ''`).Error; err != nil {
				return err
			}
		case perInsert == 0:
			// Already kept in batches: the mark stands.
			mark = `INSERT OR IGNORE INTO search_marks(name, through) VALUES ('messages', 0)`
		}
		return tx.Exec(mark).Error
	})
}

// indexMessages takes the messages written since the history index last
// did into it, inside tx, which must be a write transaction: SQLite's one
// writer at a time keeps another process from indexing the same rows.
func (d *DB) indexMessages(tx *gorm.DB) error {
	var through, last int64
	if err := tx.Raw(`SELECT through, (SELECT COALESCE(MAX(id), 0) FROM messages) FROM search_marks WHERE name = 'messages'`).
		Row().Scan(&through, &last); err != nil {
		return err
	}
	if last > through {
		if err := tx.Exec(`INSERT INTO messages_fts(rowid, text) SELECT id, text FROM messages
			WHERE id > ? AND role IN ('user', 'assistant') AND text <> '' ORDER BY id`, through).Error; err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE search_marks SET through = ? WHERE name = 'messages'`, last).Error; err != nil {
			return err
		}
	}
	d.unindexed.Store(0)
	return nil
}

// match is an FTS5 query for any of q's words, each quoted, so nothing in
// q is read as query syntax.
func match(q string) string {
	terms := tools.SearchTerms(q)
	for i, t := range terms {
		terms[i] = `"` + t + `"`
	}
	return strings.Join(terms, " OR ")
}

// tsquery is a PostgreSQL tsquery for any of q's words, each quoted, so
// nothing in q is read as query syntax.
func tsquery(q string) string {
	terms := tools.SearchTerms(q)
	for i, t := range terms {
		terms[i] = "'" + strings.ReplaceAll(t, "'", "''") + "'"
	}
	return strings.Join(terms, " | ")
}

// likeAny is the fallback's condition on column: any of q's words.
func likeAny(column, q string) (string, []any) {
	var conds []string
	var args []any
	for _, t := range tools.SearchTerms(q) {
		conds = append(conds, column+` LIKE ? ESCAPE '\'`)
		args = append(args, "%"+strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(t)+"%")
	}
	return "(" + strings.Join(conds, " OR ") + ")", args
}

// SaveMemory stores a memory of userKey.
func (d *DB) SaveMemory(ctx context.Context, userKey, text string) (memory.Memory, error) {
	row := memoryRow{UserKey: userKey, Text: text, CreatedAt: d.now()}
	if err := d.db.WithContext(ctx).Create(&row).Error; err != nil {
		return memory.Memory{}, kind(err)
	}
	d.nudge()
	return memory.Memory{ID: row.ID, Text: row.Text, CreatedAt: row.CreatedAt}, nil
}

// RecentMemories returns userKey's newest memories first.
func (d *DB) RecentMemories(ctx context.Context, userKey string, limit int) ([]memory.Memory, error) {
	// On every message (the memory block of the system prompt): a
	// prepared statement, scanned without gorm's reflection.
	rows, err := d.hotQuery(ctx, nil, `SELECT id, text, created_at FROM memories WHERE user_key = ? ORDER BY id DESC LIMIT ?`, userKey, limit)
	if err != nil {
		return nil, kind(err)
	}
	defer rows.Close()
	var out []memory.Memory
	for rows.Next() {
		var m memory.Memory
		if err := rows.Scan(&m.ID, &m.Text, &m.CreatedAt); err != nil {
			return nil, kind(err)
		}
		m.CreatedAt = m.CreatedAt.UTC()
		out = append(out, m)
	}
	return out, kind(rows.Err())
}

// SearchMemories returns userKey's memories matching any word of query,
// the best matches first; with search by meaning on (SetMeaning), fused
// with those nearest in meaning (tools.Fuse). Only userKey's rows are
// read, by words and by meaning alike.
func (d *DB) SearchMemories(ctx context.Context, userKey, query string, limit int) (memory.Found, error) {
	if len(tools.SearchTerms(query)) == 0 {
		return memory.Found{}, nil
	}
	var rows []memoryRow
	var err error
	switch {
	case d.pg:
		err = d.db.WithContext(ctx).Raw(`SELECT id, user_key, text, created_at FROM memories, to_tsquery('simple', ?) q
			WHERE user_key = ? AND text_tsv @@ q ORDER BY ts_rank(text_tsv, q) DESC, id DESC LIMIT ?`, tsquery(query), userKey, limit).Scan(&rows).Error
	case d.fts:
		err = d.db.WithContext(ctx).Raw(`SELECT m.id, m.user_key, m.text, m.created_at FROM memories_fts f JOIN memories m ON m.id = f.rowid
			WHERE memories_fts MATCH ? AND m.user_key = ? ORDER BY f.rank LIMIT ?`, match(query), userKey, limit).Scan(&rows).Error
	default:
		cond, args := likeAny("text", query)
		err = d.db.WithContext(ctx).Where("user_key = ? AND "+cond, append([]any{userKey}, args...)...).Order("id DESC").Limit(limit).Find(&rows).Error
	}
	if err != nil {
		return memory.Found{}, kind(err)
	}
	near, how, err := d.byMeaning(ctx, embedMemory, userKey, query, limit)
	if err != nil {
		return memory.Found{}, err
	}
	rows, err = fused(rows, func(r memoryRow) int64 { return r.ID }, near, limit, func(missing []int64) ([]memoryRow, error) {
		var more []memoryRow
		err := d.db.WithContext(ctx).Where("user_key = ? AND id IN ?", userKey, missing).Find(&more).Error
		return more, err
	})
	if err != nil {
		return memory.Found{}, kind(err)
	}
	return memory.Found{Memories: memories(rows), Meaning: how}, nil
}

// ForgetMemory deletes one of userKey's memories; another person's id
// deletes nothing.
func (d *DB) ForgetMemory(ctx context.Context, userKey string, id int64) (bool, error) {
	var gone bool
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Where("id = ? AND user_key = ?", id, userKey).Delete(&memoryRow{})
		if gone = res.RowsAffected > 0; res.Error != nil || !gone {
			return res.Error
		}
		return tx.Where("kind = ? AND row_id = ?", embedMemory, id).Delete(&embeddingRow{}).Error
	})
	return gone, kind(err)
}

// CountMemories counts userKey's memories.
func (d *DB) CountMemories(ctx context.Context, userKey string) (int, error) {
	var n int64
	err := d.db.WithContext(ctx).Model(&memoryRow{}).Where("user_key = ?", userKey).Count(&n).Error
	return int(n), kind(err)
}

func memories(rows []memoryRow) []memory.Memory {
	var out []memory.Memory
	for _, r := range rows {
		out = append(out, memory.Memory{ID: r.ID, Text: r.Text, CreatedAt: r.CreatedAt.UTC()})
	}
	return out
}

// SearchHistory finds the people's and the assistant's messages of
// chatKey, in every session it had, matching any word of query; the best
// matches first, each with a snippet around the words. With search by
// meaning on, they are fused with the messages nearest in meaning (their
// snippet is the message's start). Only chatKey's messages are read.
func (d *DB) SearchHistory(ctx context.Context, chatKey, query string, limit int) (history.Found, error) {
	if len(tools.SearchTerms(query)) == 0 {
		return history.Found{}, nil
	}
	var rows []historyRow
	var err error
	switch {
	case d.pg:
		err = d.db.WithContext(ctx).Raw(`SELECT m.id, m.session_id, m.created_at, m.role,
				ts_headline('simple', m.text, q, 'StartSel=[, StopSel=], MaxWords=16, MinWords=6, ShortWord=1') AS snippet
			FROM messages m JOIN sessions s ON s.id = m.session_id, to_tsquery('simple', ?) q
			WHERE s.chat_key = ? AND m.text_tsv @@ q ORDER BY ts_rank(m.text_tsv, q) DESC, m.id DESC LIMIT ?`, tsquery(query), chatKey, limit).Scan(&rows).Error
	case d.fts:
		if err := d.db.WithContext(ctx).Transaction(d.indexMessages); err != nil {
			return history.Found{}, kind(err)
		}
		err = d.db.WithContext(ctx).Raw(`SELECT m.id, m.session_id, m.created_at, m.role, snippet(messages_fts, 0, '[', ']', '…', 16) AS snippet
			FROM messages_fts f JOIN messages m ON m.id = f.rowid JOIN sessions s ON s.id = m.session_id
			WHERE messages_fts MATCH ? AND s.chat_key = ? ORDER BY f.rank LIMIT ?`, match(query), chatKey, limit).Scan(&rows).Error
	default:
		cond, args := likeAny("m.text", query)
		err = d.db.WithContext(ctx).Raw(`SELECT m.id, m.session_id, m.created_at, m.role, substr(m.text, 1, 200) AS snippet
			FROM messages m JOIN sessions s ON s.id = m.session_id
			WHERE s.chat_key = ? AND m.role IN ('user', 'assistant') AND `+cond+` ORDER BY m.id DESC LIMIT ?`,
			append(append([]any{chatKey}, args...), limit)...).Scan(&rows).Error
	}
	if err != nil {
		return history.Found{}, kind(err)
	}
	near, how, err := d.byMeaning(ctx, embedMessage, chatKey, query, limit)
	if err != nil {
		return history.Found{}, err
	}
	rows, err = fused(rows, func(r historyRow) int64 { return r.ID }, near, limit, func(missing []int64) ([]historyRow, error) {
		var more []historyRow
		err := d.db.WithContext(ctx).Raw(`SELECT m.id, m.session_id, m.created_at, m.role, substr(m.text, 1, 200) AS snippet
			FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.chat_key = ? AND m.id IN ?`, chatKey, missing).Scan(&more).Error
		return more, err
	})
	if err != nil {
		return history.Found{}, kind(err)
	}
	out := history.Found{Meaning: how}
	for _, r := range rows {
		out.Hits = append(out.Hits, history.Hit{SessionID: r.SessionID, At: r.CreatedAt.UTC(), Role: r.Role, Snippet: r.Snippet})
	}
	return out, nil
}

// fused ranks rows, found by words, and near, the ids found by meaning,
// together (tools.Fuse), at most limit of them; the rows meaning found
// that words did not are read with more, which keeps to the owner's.
// Without near, rows are as they are.
func fused[R any](rows []R, id func(R) int64, near []int64, limit int, more func(missing []int64) ([]R, error)) ([]R, error) {
	if len(near) == 0 {
		return rows, nil
	}
	byID := make(map[int64]R, len(rows)+len(near))
	words := make([]int64, len(rows))
	for i, r := range rows {
		byID[id(r)], words[i] = r, id(r)
	}
	var missing []int64
	for _, n := range near {
		if _, ok := byID[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		extra, err := more(missing)
		if err != nil {
			return nil, err
		}
		for _, r := range extra {
			byID[id(r)] = r
		}
	}
	out := rows[:0]
	for _, n := range tools.Fuse(words, near) {
		if r, ok := byID[n]; ok && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

// historyRow is a message history search found.
type historyRow struct {
	ID        int64
	SessionID int64
	CreatedAt time.Time
	Role      string
	Snippet   string
}

// ftsBatch is how many messages wait for the history index before an
// append takes them in.
const ftsBatch = 32
