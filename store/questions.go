package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"loadout/bridge"
	"loadout/chat"
)

var _ bridge.Questions = (*DB)(nil)

// question is a question a running turn asked its person
// (bridge.AskedQuestion). The partial unique index
// idx_questions_waiting keeps one waiting question per chat and answers
// "which question waits here". Times are Unix milliseconds.
type question struct {
	ID        int64  `gorm:"primaryKey"`
	Channel   string `gorm:"not null;index:idx_questions_event,priority:1"`
	ChatKey   string `gorm:"not null;index:idx_questions_event,priority:2"`
	Event     string `gorm:"not null;index:idx_questions_event,priority:3"`
	UserKey   string `gorm:"not null"`
	Turn      string `gorm:"not null"`
	Code      string `gorm:"not null"`
	Text      string
	Choices   string // JSON array, "" for none
	State     string `gorm:"not null"`
	Answer    string
	ExpiresAt int64 `gorm:"not null;index"`
	BeatAt    int64 `gorm:"not null"`
}

func (question) TableName() string { return "questions" }

// waitingQuestions is the index that keeps one waiting question per
// chat.
const waitingQuestions = `CREATE UNIQUE INDEX IF NOT EXISTS idx_questions_waiting ON questions(channel, chat_key) WHERE state = 'waiting'`

func (r question) domain() bridge.AskedQuestion {
	q := bridge.AskedQuestion{ID: r.ID, Channel: r.Channel, ChatKey: r.ChatKey, UserKey: r.UserKey, Event: r.Event, Turn: r.Turn,
		Code: r.Code, Text: r.Text, State: bridge.QuestionState(r.State), Answer: r.Answer,
		Expires: time.UnixMilli(r.ExpiresAt).UTC(), Beat: time.UnixMilli(r.BeatAt).UTC()}
	if r.Choices != "" {
		_ = json.Unmarshal([]byte(r.Choices), &q.Choices) // a row this package wrote
	}
	return q
}

func encodeChoices(choices []string) string {
	if len(choices) == 0 {
		return ""
	}
	b, _ := json.Marshal(choices) // strings always encode
	return string(b)
}

// AskQuestion records q as waiting, ending first the chat's questions
// that wait for a turn no longer running. A question of q's own run
// still waiting is found by the index of waiting questions, which
// refuses the second.
func (d *DB) AskQuestion(ctx context.Context, q bridge.AskedQuestion) (int64, error) {
	now := d.now().UnixMilli()
	row := question{Channel: q.Channel, ChatKey: q.ChatKey, UserKey: q.UserKey, Event: q.Event, Turn: q.Turn, Code: q.Code,
		Text: q.Text, Choices: encodeChoices(q.Choices), State: string(bridge.QuestionWaiting), ExpiresAt: q.Expires.UnixMilli(), BeatAt: now}
	db := d.db.WithContext(ctx)
	if err := db.Model(&question{}).Where("channel = ? AND chat_key = ? AND state = ? AND turn <> ?",
		q.Channel, q.ChatKey, bridge.QuestionWaiting, q.Turn).Update("state", bridge.QuestionEnded).Error; err != nil {
		return 0, kind(err)
	}
	err := db.Create(&row).Error
	if duplicate(err) {
		return 0, bridge.ErrAnotherQuestion
	}
	return row.ID, kind(err)
}

// WaitingQuestion returns the chat's waiting question unless it has
// expired.
func (d *DB) WaitingQuestion(ctx context.Context, channel, chatKey string) (bridge.AskedQuestion, bool, error) {
	var rows []question
	err := d.db.WithContext(ctx).Where("channel = ? AND chat_key = ? AND state = ? AND expires_at > ?",
		channel, chatKey, bridge.QuestionWaiting, d.now().UnixMilli()).Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return bridge.AskedQuestion{}, false, kind(err)
	}
	return rows[0].domain(), true, nil
}

// SettleQuestion moves a waiting question to answered or cancelled,
// and finishes the inbox item seq that answered (when not 0) with it.
// On PostgreSQL it is one statement.
func (d *DB) SettleQuestion(ctx context.Context, id int64, state bridge.QuestionState, answer string, seq int64) (bool, error) {
	if state != bridge.QuestionAnswered && state != bridge.QuestionCancelled {
		return false, fmt.Errorf("store: settle question %d: %q is not an answer's state", id, state)
	}
	if d.pg {
		var n int64
		err := d.db.WithContext(ctx).Raw(`WITH q AS (UPDATE questions SET state = ?, answer = ? WHERE id = ? AND state = 'waiting' RETURNING id),
			i AS (UPDATE inbox_items SET state = 'done', updated_at = ? WHERE seq = ? AND EXISTS (SELECT 1 FROM q) RETURNING seq)
			SELECT count(*) FROM q`, string(state), answer, id, d.now(), seq).Scan(&n).Error
		return n == 1, kind(err)
	}
	settled := false
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&question{}).Where("id = ? AND state = ?", id, bridge.QuestionWaiting).
			Updates(map[string]any{"state": string(state), "answer": answer})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		settled = true
		if seq == 0 {
			return nil
		}
		return tx.Exec("UPDATE inbox_items SET state = ?, updated_at = ? WHERE seq = ?", bridge.StateDone, d.now(), seq).Error
	})
	return settled && err == nil, kind(err)
}

// PollQuestion renews the question's beat, takes its answer if it has
// one, and returns it, in one statement.
func (d *DB) PollQuestion(ctx context.Context, id int64) (bridge.AskedQuestion, error) {
	var r question
	var choices sql.NullString
	err := d.db.WithContext(ctx).Raw(`UPDATE questions SET beat_at = ?, state = CASE WHEN state = 'answered' THEN 'taken' ELSE state END
		WHERE id = ? RETURNING id, channel, chat_key, event, user_key, turn, code, text, choices, state, answer, expires_at, beat_at`,
		d.now().UnixMilli(), id).Row().Scan(&r.ID, &r.Channel, &r.ChatKey, &r.Event, &r.UserKey, &r.Turn, &r.Code, &r.Text, &choices,
		&r.State, &r.Answer, &r.ExpiresAt, &r.BeatAt)
	if errors.Is(err, sql.ErrNoRows) {
		return bridge.AskedQuestion{}, fmt.Errorf("store: question %d: %w", id, chat.ErrNotFound)
	}
	if err != nil {
		return bridge.AskedQuestion{}, kind(err)
	}
	r.Choices = choices.String
	return r.domain(), nil
}

// EndQuestion ends a question that still waits.
func (d *DB) EndQuestion(ctx context.Context, id int64) error {
	return kind(d.db.WithContext(ctx).Model(&question{}).Where("id = ? AND state = ?", id, bridge.QuestionWaiting).
		Update("state", bridge.QuestionEnded).Error)
}

// TakeAnswered takes the answer an earlier run of q's turn was given
// for the same question, in one statement.
func (d *DB) TakeAnswered(ctx context.Context, q bridge.AskedQuestion) (string, bool, error) {
	var answer string
	err := d.db.WithContext(ctx).Raw(`UPDATE questions SET state = 'taken' WHERE state = 'answered' AND id = (
			SELECT id FROM questions WHERE channel = ? AND chat_key = ? AND event = ? AND user_key = ? AND turn <> ?
				AND state = 'answered' AND text = ? AND choices = ? ORDER BY id LIMIT 1)
		RETURNING answer`, q.Channel, q.ChatKey, q.Event, q.UserKey, q.Turn, q.Text, encodeChoices(q.Choices)).Row().Scan(&answer)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, kind(err)
	}
	return answer, true, nil
}

// pruneQuestions deletes the questions that expired before t.
func (d *DB) pruneQuestions(ctx context.Context, before time.Time) error {
	return kind(d.db.WithContext(ctx).Where("expires_at < ?", before.UnixMilli()).Delete(&question{}).Error)
}
