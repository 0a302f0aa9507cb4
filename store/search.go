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

// fts5 reports whether this build's SQLite has FTS5.
func fts5(g *gorm.DB) bool {
	var on int
	g.Raw("SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&on)
	return on == 1
}

// searchSchema creates the full-text indexes of memories and of the
// people's and the assistant's messages, kept in step by triggers, and
// fills them from the rows already there. Without FTS5 there are none,
// and search falls back to a scan; a database that has them cannot be
// used by such a build, since its triggers would fail every write.
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
		for _, s := range []string{
			`CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(text, content='memories', content_rowid='id', tokenize='unicode61 remove_diacritics 2')`,
			`CREATE TRIGGER IF NOT EXISTS memories_fts_ai AFTER INSERT ON memories BEGIN
				INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text); END`,
			`CREATE TRIGGER IF NOT EXISTS memories_fts_ad AFTER DELETE ON memories BEGIN
				INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text); END`,
			`CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(text, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2')`,
			`CREATE TRIGGER IF NOT EXISTS messages_fts_ai AFTER INSERT ON messages WHEN new.role IN ('user', 'assistant') AND new.text <> '' BEGIN
				INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text); END`,
			`CREATE TRIGGER IF NOT EXISTS messages_fts_ad AFTER DELETE ON messages WHEN old.role IN ('user', 'assistant') AND old.text <> '' BEGIN
				INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text); END`,
		} {
			if err := tx.Exec(s).Error; err != nil {
				return err
			}
		}
		if have > 0 {
			return nil
		}
		if err := tx.Exec(`INSERT INTO memories_fts(rowid, text) SELECT id, text FROM memories`).Error; err != nil {
			return err
		}
		return tx.Exec(`INSERT INTO messages_fts(rowid, text) SELECT id, text FROM messages WHERE role IN ('user', 'assistant') AND text <> ''`).Error
	})
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
	return memory.Memory{ID: row.ID, Text: row.Text, CreatedAt: row.CreatedAt}, nil
}

// RecentMemories returns userKey's newest memories first.
func (d *DB) RecentMemories(ctx context.Context, userKey string, limit int) ([]memory.Memory, error) {
	var rows []memoryRow
	err := d.db.WithContext(ctx).Where("user_key = ?", userKey).Order("id DESC").Limit(limit).Find(&rows).Error
	return memories(rows), kind(err)
}

// SearchMemories returns userKey's memories matching any word of query,
// the best matches first.
func (d *DB) SearchMemories(ctx context.Context, userKey, query string, limit int) ([]memory.Memory, error) {
	if len(tools.SearchTerms(query)) == 0 {
		return nil, nil
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
	return memories(rows), kind(err)
}

// ForgetMemory deletes one of userKey's memories; another person's id
// deletes nothing.
func (d *DB) ForgetMemory(ctx context.Context, userKey string, id int64) (bool, error) {
	res := d.db.WithContext(ctx).Where("id = ? AND user_key = ?", id, userKey).Delete(&memoryRow{})
	return res.RowsAffected > 0, kind(res.Error)
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
// matches first, each with a snippet around the words.
func (d *DB) SearchHistory(ctx context.Context, chatKey, query string, limit int) ([]history.Hit, error) {
	if len(tools.SearchTerms(query)) == 0 {
		return nil, nil
	}
	type row struct {
		SessionID int64
		CreatedAt time.Time
		Role      string
		Snippet   string
	}
	var rows []row
	var err error
	switch {
	case d.pg:
		err = d.db.WithContext(ctx).Raw(`SELECT m.session_id, m.created_at, m.role,
				ts_headline('simple', m.text, q, 'StartSel=[, StopSel=], MaxWords=16, MinWords=6, ShortWord=1') AS snippet
			FROM messages m JOIN sessions s ON s.id = m.session_id, to_tsquery('simple', ?) q
			WHERE s.chat_key = ? AND m.text_tsv @@ q ORDER BY ts_rank(m.text_tsv, q) DESC, m.id DESC LIMIT ?`, tsquery(query), chatKey, limit).Scan(&rows).Error
	case d.fts:
		err = d.db.WithContext(ctx).Raw(`SELECT m.session_id, m.created_at, m.role, snippet(messages_fts, 0, '[', ']', '…', 16) AS snippet
			FROM messages_fts f JOIN messages m ON m.id = f.rowid JOIN sessions s ON s.id = m.session_id
			WHERE messages_fts MATCH ? AND s.chat_key = ? ORDER BY f.rank LIMIT ?`, match(query), chatKey, limit).Scan(&rows).Error
	default:
		cond, args := likeAny("m.text", query)
		err = d.db.WithContext(ctx).Raw(`SELECT m.session_id, m.created_at, m.role, substr(m.text, 1, 200) AS snippet
			FROM messages m JOIN sessions s ON s.id = m.session_id
			WHERE s.chat_key = ? AND m.role IN ('user', 'assistant') AND `+cond+` ORDER BY m.id DESC LIMIT ?`,
			append(append([]any{chatKey}, args...), limit)...).Scan(&rows).Error
	}
	if err != nil {
		return nil, kind(err)
	}
	var out []history.Hit
	for _, r := range rows {
		out = append(out, history.Hit{SessionID: r.SessionID, At: r.CreatedAt.UTC(), Role: r.Role, Snippet: r.Snippet})
	}
	return out, nil
}
