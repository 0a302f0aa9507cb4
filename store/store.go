// Package store persists loadout's state in SQLite through gorm: sessions,
// messages with their tool calls and results, token usage, per-chat
// settings, and small channel state such as update offsets. It implements
// the interfaces that chat and the tool groups consume.
package store

import (
	"cmp"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"loadout/chat"
	"loadout/tools"
)

var _ chat.Store = (*DB)(nil)

// DB is the SQLite store. It is safe for concurrent use.
type DB struct {
	db *gorm.DB
	// hot keeps the per-message statements prepared; nil on PostgreSQL,
	// whose driver keeps its own.
	hot *hotStatements
	now func() time.Time
	// fts is set when SQLite has FTS5 and the search indexes exist.
	fts bool
	// pg is set for PostgreSQL, whose full-text search is tsvector.
	pg bool
	// schema is PostgreSQL's current schema: advisory locks, which the
	// server keeps per database, are keyed within it (lockKey), so that
	// two schemas of one database never wait on each other.
	schema string
	// unindexed counts the messages this process wrote since it last
	// brought the history index up to date (see indexMessages).
	unindexed atomic.Int64
	// sig delivers notices (Signal, Listen).
	sig *signals
	// meaning is search by meaning (SetMeaning); nil while embeddings
	// are off. wake tells the embedding job of rows written.
	meaning *Meaning
	wake    chan struct{}
}

// session is a chat's conversation from open until /clear.
type session struct {
	ID               int64  `gorm:"primaryKey"`
	ChatKey          string `gorm:"not null;index"`
	OpenedAt         time.Time
	ClosedAt         *time.Time
	Messages         int
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
}

// message is one history entry. The index idx_messages_loaded answers
// "groups loaded in session S" from the index alone.
type message struct {
	ID         int64  `gorm:"primaryKey"`
	SessionID  int64  `gorm:"not null;index:idx_messages_session;index:idx_messages_loaded,priority:1"`
	Role       string `gorm:"not null"`
	Text       string
	ToolCalls  string // JSON array of chat.ToolCall on assistant messages
	ToolCallID string
	ToolName   string `gorm:"index:idx_messages_loaded,priority:2"`
	Status     string `gorm:"index:idx_messages_loaded,priority:3"`
	// GroupChanges are a tool result's chat.Message.Groups, encoded
	// by encodeGroups; "" when it changed none.
	GroupChanges string `gorm:"index:idx_messages_loaded,priority:4"`
	// Code is a tool result's error code.
	Code      string
	Arguments string
	// AskID is, on the assistant message that asks the person to
	// approve a held call, the approval's id (chat.Message.Ask).
	AskID      string
	UserKey    string
	ExternalID string
	Tokens     int
	// PromptTokens, CompletionTokens and CachedTokens are what the model
	// call that wrote an assistant message cost, as the provider reported.
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
	CreatedAt        time.Time
}

// chatSetting is one per-chat setting.
type chatSetting struct {
	ChatKey   string `gorm:"primaryKey"`
	Key       string `gorm:"primaryKey"`
	Value     string
	UpdatedAt time.Time
}

// state is a small named value kept by a channel, such as an offset.
type state struct {
	Key       string `gorm:"primaryKey"`
	Value     string
	UpdatedAt time.Time
}

// gormConfig is how both drivers are opened: quiet, with no transaction
// around single writes (the store opens its own), and times in UTC.
func gormConfig() *gorm.Config {
	return &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true, NowFunc: utcNow}
}

func utcNow() time.Time { return time.Now().UTC() }

// GiveBack hands back to the system what an idle process need not hold
// once start-up's work on the database (the schema read, a migration,
// the first reads) is done: on SQLite, the pages each kept connection
// cached (PRAGMA shrink_memory; the next statement reads what it needs
// again, from the kernel's cache of the file), then what the C allocator
// kept of SQLite's frees (see keepFreedMemory). A connection in use by a
// turn is left as it is. It is meant for a moment of idleness: it costs
// the next few statements their cached pages.
func (d *DB) GiveBack(ctx context.Context) {
	if d.hot != nil {
		sqlDB, err := d.db.DB()
		if err == nil {
			ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			// Each connection taken is held until every one is shrunk, so
			// the pool hands out a different one each time.
			for range maxConns {
				conn, err := sqlDB.Conn(ctx)
				if err != nil {
					break
				}
				defer conn.Close()
				conn.ExecContext(ctx, "PRAGMA shrink_memory")
			}
		}
	}
	giveBack()
}

// Close closes the database.
func (d *DB) Close() error {
	sqlDB, err := d.db.DB()
	if err != nil {
		return err
	}
	if d.hot != nil {
		d.hot.close()
	}
	d.sig.close()
	return sqlDB.Close()
}

// Gorm returns the underlying handle, for packages that keep their own
// tables in the same file.
func (d *DB) Gorm() *gorm.DB { return d.db }

// OpenSession returns the chat's open session, opening one if none is. The
// common case, an open session, is a plain read; only opening one takes
// the write lock.
func (d *DB) OpenSession(ctx context.Context, chatKey string) (chat.Session, error) {
	// On every message: one query, scanned without gorm's reflection.
	s, err := d.openSession(ctx, nil, chatKey)
	if err == nil {
		return s.domain(), nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Session{}, kind(err)
	}
	err = d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		s, err = d.openSession(ctx, tx, chatKey)
		if errors.Is(err, gorm.ErrRecordNotFound) {
			s = session{ChatKey: chatKey, OpenedAt: d.now()}
			return tx.Create(&s).Error
		}
		return err
	})
	if duplicate(err) {
		// Another process opened it at the same moment (PostgreSQL runs
		// the two transactions side by side): that one is the chat's.
		s, err = d.openSession(ctx, nil, chatKey)
	}
	if err != nil {
		return chat.Session{}, kind(err)
	}
	return s.domain(), nil
}

// openSession reads the chat's open session, in tx (nil: none);
// gorm.ErrRecordNotFound when it has none.
func (d *DB) openSession(ctx context.Context, tx *gorm.DB, chatKey string) (session, error) {
	s := session{ChatKey: chatKey}
	err := d.hotRow(ctx, tx, `SELECT id, opened_at, COALESCE(messages, 0), COALESCE(prompt_tokens, 0),
		COALESCE(completion_tokens, 0), COALESCE(cached_tokens, 0) FROM sessions WHERE chat_key = ? AND closed_at IS NULL LIMIT 1`, chatKey).
		Scan(&s.ID, &s.OpenedAt, &s.Messages, &s.PromptTokens, &s.CompletionTokens, &s.CachedTokens)
	if errors.Is(err, sql.ErrNoRows) {
		return s, gorm.ErrRecordNotFound
	}
	return s, err
}

func (s session) domain() chat.Session {
	return chat.Session{
		ID: s.ID, ChatKey: s.ChatKey, OpenedAt: s.OpenedAt, Messages: s.Messages,
		Usage: chat.Usage{PromptTokens: int(s.PromptTokens), CompletionTokens: int(s.CompletionTokens), CachedTokens: int(s.CachedTokens)},
	}
}

// CloseSession closes the chat's open session, if any, and cancels the
// approvals it was waiting for.
func (d *DB) CloseSession(ctx context.Context, chatKey string) (bool, error) {
	now := d.now()
	var closed bool
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&session{}).Where("chat_key = ? AND closed_at IS NULL", chatKey).Update("closed_at", &now)
		if res.Error != nil {
			return res.Error
		}
		closed = res.RowsAffected > 0
		// What was waiting for approval in the cleared conversation
		// will not run.
		return cancelApprovals(tx, chatKey, now)
	})
	return closed, kind(err)
}

// ErrNoSQLite is Open's error in a build without cgo.
var ErrNoSQLite = errors.New("this build has no SQLite support: build with CGO_ENABLED=1 and a C compiler (gcc)")

// appendBatch is how many messages one INSERT writes (messageColumns
// variables each).
const appendBatch = 200

// Append persists msgs in one transaction, records usage (one model
// call's) with the assistant message among them, and adds it to the
// session's counters.
func (d *DB) Append(ctx context.Context, sessionID int64, msgs []chat.Message, usage chat.Usage, audit ...chat.AuditEntry) error {
	return d.appendWith(ctx, sessionID, msgs, usage, audit, nil)
}

// appendWith is Append with more work (also) in its transaction.
func (d *DB) appendWith(ctx context.Context, sessionID int64, msgs []chat.Message, usage chat.Usage, audit []chat.AuditEntry, also func(tx *gorm.DB) error) error {
	// Written with plain SQL: this runs on every turn, and gorm's
	// reflection over the rows cost as much as SQLite's own work.
	args := make([]any, 0, len(msgs)*messageColumns)
	now := d.now()
	for _, m := range msgs {
		var calls string
		if len(m.ToolCalls) > 0 {
			b, err := json.Marshal(m.ToolCalls)
			if err != nil {
				return fmt.Errorf("encode tool calls: %w", err)
			}
			calls = string(b)
		}
		groups, err := encodeGroups(m.Groups)
		if err != nil {
			return err
		}
		var spent chat.Usage
		if m.Role == chat.RoleAssistant {
			// The round's model call: one assistant message per round.
			spent = usage
		}
		args = append(args, sessionID, string(m.Role), m.Text, calls, m.ToolCallID, m.ToolName, m.Status,
			groups, m.Code, m.Arguments, m.Ask, m.UserKey, m.ExternalID, m.Tokens,
			spent.PromptTokens, spent.CompletionTokens, spent.CachedTokens, now)
	}
	// Prepared before the transaction begins: inside it, a statement
	// not yet prepared runs unprepared.
	n := min(len(msgs), appendBatch)
	insert := insertMessages(n)
	if n > 0 {
		d.prepareHot(ctx, insert, updateCounters)
	}
	err := kind(d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// In batches: one INSERT of a huge round would pass SQLite's
		// limit on bound variables.
		for b := range slices.Chunk(args, appendBatch*messageColumns) {
			q := insert
			if len(b) != n*messageColumns {
				q = insertMessages(len(b) / messageColumns)
			}
			if _, err := d.hotExec(ctx, tx, q, b...); err != nil {
				return err
			}
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if err := appendAudit(tx, now, audit...); err != nil {
			return err
		}
		if d.fts && d.unindexed.Add(int64(len(msgs))) >= ftsBatch {
			if err := d.indexMessages(tx); err != nil {
				return err
			}
		}
		_, err := d.hotExec(ctx, tx, updateCounters, len(msgs), usage.PromptTokens, usage.CompletionTokens, usage.CachedTokens, sessionID)
		return err
	}))
	if err == nil {
		d.nudge() // the new messages are to be embedded
	}
	return err
}

// updateCounters adds a turn's messages and usage to its session's
// counters.
const updateCounters = `UPDATE sessions SET messages = messages + ?, prompt_tokens = prompt_tokens + ?,
	completion_tokens = completion_tokens + ?, cached_tokens = cached_tokens + ? WHERE id = ?`

// messageColumns is how many columns insertMessages writes a message to.
const messageColumns = 18

// insertMessages is the INSERT of n messages, each with messageColumns
// values in the order appendWith gives them.
func insertMessages(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO messages (session_id, role, text, tool_calls, tool_call_id, tool_name, status,
		group_changes, code, arguments, ask_id, user_key, external_id, tokens,
		prompt_tokens, completion_tokens, cached_tokens, created_at) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	return b.String()
}

// Recent returns up to limit of the session's latest messages, oldest first.
// It scans rows directly: this runs on every message whose history is not
// cached, so it avoids gorm's per-row reflection. Empty text columns come
// back as NULL, which the driver reads with one call into SQLite instead of
// three, and the times are not read (the history needs none): a cold read
// of 400 rows spent most of its time in those calls and in parsing times.
func (d *DB) Recent(ctx context.Context, sessionID int64, limit int) ([]chat.Message, error) {
	rows, err := d.hotQuery(ctx, nil, `SELECT id, role, NULLIF(text, ''), NULLIF(tool_calls, ''),
		NULLIF(tool_call_id, ''), NULLIF(tool_name, ''), NULLIF(status, ''), NULLIF(code, ''),
		NULLIF(arguments, ''), NULLIF(group_changes, ''), NULLIF(ask_id, ''), NULLIF(user_key, ''), NULLIF(external_id, ''), tokens
		FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT ?`, sessionID, limit)
	if err != nil {
		return nil, kind(err)
	}
	defer rows.Close()
	// The window is kept by the engine's cache for as long as the chat is
	// live, so it grows with what is read rather than being sized for the
	// limit: a new chat's few messages must not hold a 400-slot array.
	var out []chat.Message
	// One set of scan targets for every row: taken by address, they
	// would otherwise be allocated anew for each.
	var (
		id, tokens                                                                  int64
		role, text, calls, callID, tool, status, code, args, groups, ask, user, ext sql.NullString
	)
	dest := []any{&id, &role, &text, &calls, &callID, &tool, &status, &code, &args, &groups, &ask, &user, &ext, &tokens}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		m := chat.Message{ID: id, Role: chat.Role(role.String), Text: text.String, ToolCallID: callID.String, ToolName: tool.String,
			Status: status.String, Code: code.String, Arguments: args.String, Ask: ask.String, UserKey: user.String,
			ExternalID: ext.String, Tokens: int(tokens)}
		if m.Groups, err = decodeGroups(groups.String); err != nil {
			return nil, fmt.Errorf("decode group changes of message %d: %w", m.ID, err)
		}
		if calls.String != "" {
			if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
				return nil, fmt.Errorf("decode tool calls of message %d: %w", m.ID, err)
			}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// groupChangers are the tools whose successful results record group
// changes in group_changes (see tools.ApplyGroupChanges).
var groupChangers = [3]string{tools.LoadGroupName, tools.UnloadGroupName, tools.FindToolsName}

// LoadedGroups returns the groups loaded in the session, in load order:
// the changes recorded by successful load_tool_group, find_tools and
// unload_tool_group calls, applied in the order they were made. It reads
// only the index idx_messages_loaded (whose entries carry the row id).
func (d *DB) LoadedGroups(ctx context.Context, sessionID int64) ([]string, error) {
	// Sorted here, not by ORDER BY id: that would lead SQLite to walk the
	// whole session through idx_messages_session instead.
	rows, err := d.hotQuery(ctx, nil, `SELECT id, group_changes FROM messages
		WHERE session_id = ? AND tool_name IN (?, ?, ?) AND status = ? AND group_changes <> ''`,
		sessionID, groupChangers[0], groupChangers[1], groupChangers[2], tools.StatusSuccess)
	if err != nil {
		return nil, kind(err)
	}
	defer rows.Close()
	type change struct {
		id      int64
		changes string
	}
	var changes []change
	for rows.Next() {
		var c change
		if err := rows.Scan(&c.id, &c.changes); err != nil {
			return nil, kind(err)
		}
		changes = append(changes, c)
	}
	if err := rows.Err(); err != nil {
		return nil, kind(err)
	}
	slices.SortFunc(changes, func(a, b change) int { return cmp.Compare(a.id, b.id) })
	var groups []string
	for _, c := range changes {
		decoded, err := decodeGroups(c.changes)
		if err != nil {
			return nil, fmt.Errorf("decode group changes of message %d: %w", c.id, err)
		}
		groups = tools.ApplyGroupChanges(groups, decoded)
	}
	return groups, nil
}

// encodeGroups is how a message's group changes are stored: a JSON
// array of tools.GroupChange, or "" for none (which keeps the message
// out of the loaded-groups query).
func encodeGroups(changes []tools.GroupChange) (string, error) {
	if len(changes) == 0 {
		return "", nil
	}
	b, err := json.Marshal(changes)
	if err != nil {
		return "", fmt.Errorf("encode group changes: %w", err)
	}
	return string(b), nil
}

// decodeGroups reads what encodeGroups stored.
func decodeGroups(s string) ([]tools.GroupChange, error) {
	if s == "" {
		return nil, nil
	}
	var changes []tools.GroupChange
	err := json.Unmarshal([]byte(s), &changes)
	return changes, err
}

// ChatSettings returns all settings of a chat.
func (d *DB) ChatSettings(ctx context.Context, chatKey string) (map[string]string, error) {
	// On every message: scanned without gorm's reflection.
	rows, err := d.hotQuery(ctx, nil, `SELECT "key", "value" FROM chat_settings WHERE chat_key = ?`, chatKey)
	if err != nil {
		return nil, kind(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k string
		var v sql.NullString
		if err := rows.Scan(&k, &v); err != nil {
			return nil, kind(err)
		}
		out[k] = v.String
	}
	return out, kind(rows.Err())
}

// SetChatSetting stores one setting of a chat; an empty value deletes it.
func (d *DB) SetChatSetting(ctx context.Context, chatKey, key, value string) error {
	db := d.db.WithContext(ctx)
	if value == "" {
		return db.Where("chat_key = ? AND key = ?", chatKey, key).Delete(&chatSetting{}).Error
	}
	return db.Clauses(clause.OnConflict{UpdateAll: true}).
		Create(&chatSetting{ChatKey: chatKey, Key: key, Value: value, UpdatedAt: d.now()}).Error
}

// State returns a named value, or "" if it was never set.
func (d *DB) State(ctx context.Context, key string) (string, error) {
	var s state
	err := d.db.WithContext(ctx).Where("key = ?", key).Take(&s).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	return s.Value, err
}

// SetState stores a named value.
func (d *DB) SetState(ctx context.Context, key, value string) error {
	return d.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).
		Create(&state{Key: key, Value: value, UpdatedAt: d.now()}).Error
}

// SwapState stores value under key if key still holds old ("" for
// none), and reports whether it did. On PostgreSQL the old value is
// compared by its MD5, so a large value is not sent twice.
func (d *DB) SwapState(ctx context.Context, key, old, value string) (bool, error) {
	db := d.db.WithContext(ctx)
	now := d.now()
	var res *gorm.DB
	switch {
	case d.pg:
		sum := md5.Sum([]byte(old))
		res = db.Exec("UPDATE states SET value = ?, updated_at = ? WHERE key = ? AND md5(value) = ?", value, now, key, hex.EncodeToString(sum[:]))
	default:
		res = db.Exec("UPDATE states SET value = ?, updated_at = ? WHERE key = ? AND value = ?", value, now, key, old)
	}
	if res.Error != nil || res.RowsAffected == 1 || old != "" {
		return res.RowsAffected == 1, kind(res.Error)
	}
	res = db.Clauses(clause.OnConflict{DoNothing: true}).Create(&state{Key: key, Value: value, UpdatedAt: now})
	return res.RowsAffected == 1, kind(res.Error)
}
