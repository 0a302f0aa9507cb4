package store

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"gorm.io/gorm"
)

// What channels keep for every replica of a deployment, each written in
// one statement or one transaction holding its key, so that two
// processes changing the same thing at the same instant lose nothing:
// read positions that only move forward (cursors), counts over a window
// (hits), and the messages a chat holds for the person's next message
// (held messages).

// lockKey holds key until tx ends. PostgreSQL runs writers side by side:
// an advisory lock taken in the transaction serializes those of one key.
// SQLite's transactions begin immediate (see Open), which holds the
// whole database already.
func (d *DB) lockKey(tx *gorm.DB, key string) error {
	if !d.pg {
		return nil
	}
	return tx.Exec("SELECT pg_advisory_xact_lock(?)", advisoryKey(d.schema, key)).Error
}

// advisoryKey is the PostgreSQL advisory lock key of name within schema.
func advisoryKey(schema, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(schema + "\x00" + name))
	return int64(h.Sum64())
}

// cursor is how far a channel has read one of its sources (a
// conversation, a mailbox): a position that only moves forward.
type cursor struct {
	Scope     string `gorm:"primaryKey"`
	Name      string `gorm:"primaryKey"`
	Pos       int64  `gorm:"not null"`
	UpdatedAt time.Time
}

func (cursor) TableName() string { return "cursors" }

// Cursors returns the cursors of scope (a channel's name) by name; an
// empty map when there are none.
func (d *DB) Cursors(ctx context.Context, scope string) (map[string]int64, error) {
	var rows []cursor
	if err := d.db.WithContext(ctx).Where("scope = ?", scope).Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Pos
	}
	return out, nil
}

// advanceCursor moves a cursor forward in one statement: a lower or
// equal position changes nothing.
const advanceCursor = `INSERT INTO cursors (scope, name, pos, updated_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (scope, name) DO UPDATE SET pos = excluded.pos, updated_at = excluded.updated_at
	WHERE cursors.pos < excluded.pos`

// AdvanceCursor moves scope's cursor name to pos, creating it, but never
// back: a process that lost its duty and writes late cannot undo what
// the next one read. It reports whether the cursor moved.
func (d *DB) AdvanceCursor(ctx context.Context, scope, name string, pos int64) (bool, error) {
	res := d.db.WithContext(ctx).Exec(advanceCursor, scope, name, pos, d.now())
	if res.Error != nil {
		return false, kind(res.Error)
	}
	return res.RowsAffected > 0, nil
}

// rateHit is one event counted under a key (a sender's address) until it
// expires: a limit of so many in a window counts the rows not expired.
// Ref names the event, so the same event read again counts once.
type rateHit struct {
	Key       string `gorm:"primaryKey"`
	Ref       string `gorm:"primaryKey"`
	ExpiresAt int64  `gorm:"not null;index"`
}

func (rateHit) TableName() string { return "rate_hits" }

// Hit counts event ref under key for window, when fewer than max events
// of key were counted in the last window, and reports whether it did: a
// refused event is not counted. An event counted before (the same ref)
// is allowed again without counting twice. Replicas count in one place:
// the check and the count are one transaction holding key.
func (d *DB) Hit(ctx context.Context, key, ref string, max int, window time.Duration) (bool, error) {
	now := d.now().UnixMilli()
	db := d.db.WithContext(ctx)
	if err := db.Where("expires_at <= ?", now).Delete(&rateHit{}).Error; err != nil {
		return false, kind(err)
	}
	allowed := false
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := d.lockKey(tx, "hit:"+key); err != nil {
			return err
		}
		var seen, n int64
		if err := tx.Model(&rateHit{}).Where("key = ? AND ref = ?", key, ref).Count(&seen).Error; err != nil {
			return err
		}
		if seen > 0 {
			allowed = true
			return nil
		}
		// Counted up to max: a key allowed many costs no more.
		if err := tx.Raw(`SELECT count(*) FROM (SELECT 1 FROM rate_hits WHERE key = ? AND expires_at > ? LIMIT ?) AS hits`, key, now, max).Scan(&n).Error; err != nil {
			return err
		}
		if n >= int64(max) {
			return nil
		}
		allowed = true
		return tx.Create(&rateHit{Key: key, Ref: ref, ExpiresAt: now + window.Milliseconds()}).Error
	})
	if err != nil {
		return false, kind(err)
	}
	return allowed, nil
}

// heldMessage is a message a chat holds for the person's next message
// (WhatsApp's answers while its 24-hour window is closed), one row each:
// holding appends, so two replicas holding at once both keep theirs.
// TakenBy names the message that gives it, once taken; Dropped counts
// older ones dropped to keep the chat's bound, carried by a held row.
type heldMessage struct {
	ID        int64  `gorm:"primaryKey"`
	Chat      string `gorm:"not null;index:idx_held_chat,priority:1"`
	TakenBy   string `gorm:"not null;default:'';index:idx_held_chat,priority:2"`
	Text      string `gorm:"not null"`
	Dropped   int    `gorm:"not null;default:0"`
	CreatedAt time.Time
}

func (heldMessage) TableName() string { return "held_messages" }

// HoldMessage keeps text for chat after what it holds, keeping the keep
// newest (keep > 0): older ones are dropped and counted. It returns how
// many the chat holds now. It runs in a transaction holding the chat,
// so concurrent holds and takes of one chat lose nothing.
func (d *DB) HoldMessage(ctx context.Context, chat, text string, keep int) (int, error) {
	held := 0
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := d.lockKey(tx, "held:"+chat); err != nil {
			return err
		}
		row := heldMessage{Chat: chat, Text: text, CreatedAt: d.now()}
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		var rows []heldMessage
		if err := tx.Select("id", "dropped").Where("chat = ? AND taken_by = ''", chat).Order("id").Find(&rows).Error; err != nil {
			return err
		}
		held = len(rows)
		over := len(rows) - max(keep, 1)
		if over <= 0 {
			return nil
		}
		dropped, ids := 0, make([]int64, 0, over)
		for _, r := range rows[:over] {
			dropped += 1 + r.Dropped
			ids = append(ids, r.ID)
		}
		held -= over
		if err := tx.Where("id IN ?", ids).Delete(&heldMessage{}).Error; err != nil {
			return err
		}
		return tx.Model(&heldMessage{}).Where("id = ?", row.ID).Update("dropped", gorm.Expr("dropped + ?", dropped)).Error
	})
	if err != nil {
		return 0, kind(err)
	}
	return held, nil
}

// HeldMessages returns what chat holds and nobody took yet, oldest
// first, and how many older ones were dropped.
func (d *DB) HeldMessages(ctx context.Context, chat string) ([]string, int, error) {
	return d.held(d.db.WithContext(ctx), chat, "")
}

func (d *DB) held(db *gorm.DB, chat, by string) ([]string, int, error) {
	var rows []heldMessage
	if err := db.Where("chat = ? AND taken_by = ?", chat, by).Order("id").Find(&rows).Error; err != nil {
		return nil, 0, kind(err)
	}
	var texts []string
	dropped := 0
	for _, r := range rows {
		texts = append(texts, r.Text)
		dropped += r.Dropped
	}
	return texts, dropped, nil
}

// TakeHeldMessages takes what chat holds for the message by (the
// person's message that gives them), and returns everything by has
// taken, this time and before, oldest first, with how many older ones
// were dropped: a giver that failed midway takes the same again. What is
// held after this stays for the next message.
func (d *DB) TakeHeldMessages(ctx context.Context, chat, by string) ([]string, int, error) {
	var texts []string
	dropped := 0
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := d.lockKey(tx, "held:"+chat); err != nil {
			return err
		}
		if err := tx.Model(&heldMessage{}).Where("chat = ? AND taken_by = ''", chat).Update("taken_by", by).Error; err != nil {
			return err
		}
		var err error
		texts, dropped, err = d.held(tx, chat, by)
		return err
	})
	if err != nil {
		return nil, 0, kind(err)
	}
	return texts, dropped, nil
}

// ForgetHeldMessages deletes what the message by took of chat's held
// messages, once they are given.
func (d *DB) ForgetHeldMessages(ctx context.Context, chat, by string) error {
	if by == "" {
		return fmt.Errorf("store: forget held messages of %s: no taker named", chat)
	}
	return kind(d.db.WithContext(ctx).Where("chat = ? AND taken_by = ?", chat, by).Delete(&heldMessage{}).Error)
}

// heldStatePrefix is where an earlier version kept a WhatsApp chat's
// held messages: one state per person's number, a JSON object rewritten
// whole at every change.
const heldStatePrefix = "whatsapp:held:"

// moveHeldStates moves the held messages an earlier version kept as
// states into held_messages, once: the states are deleted as they move.
func moveHeldStates(tx *gorm.DB) error {
	var rows []state
	if err := tx.Where("key LIKE ?", heldStatePrefix+"%").Find(&rows).Error; err != nil {
		return err
	}
	for _, s := range rows {
		var h struct {
			Parts   []string `json:"parts"`
			Dropped int      `json:"dropped"`
		}
		if s.Value != "" && json.Unmarshal([]byte(s.Value), &h) == nil {
			chat := "whatsapp:" + strings.TrimPrefix(s.Key, heldStatePrefix)
			for i, p := range h.Parts {
				row := heldMessage{Chat: chat, Text: p, CreatedAt: s.UpdatedAt}
				if i == 0 {
					row.Dropped = h.Dropped
				}
				if err := tx.Create(&row).Error; err != nil {
					return err
				}
			}
		}
		if err := tx.Where("key = ?", s.Key).Delete(&state{}).Error; err != nil {
			return err
		}
	}
	return nil
}
