package store

import (
	"context"
	"time"

	"loadout/voice"
)

// voiceUsage is what voice cost a chat: notes transcribed, their
// seconds, and the characters of answers read aloud.
type voiceUsage struct {
	ChatKey   string `gorm:"primaryKey"`
	Notes     int    `gorm:"not null;default:0"`
	Seconds   int    `gorm:"not null;default:0"`
	Chars     int    `gorm:"not null;default:0"`
	UpdatedAt time.Time
}

// AddVoiceUsage adds what a note or a spoken answer cost to the chat's
// count, in one statement.
func (d *DB) AddVoiceUsage(ctx context.Context, chatKey string, spent voice.Spent) error {
	return kind(d.db.WithContext(ctx).Exec(`INSERT INTO voice_usages (chat_key, notes, seconds, chars, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (chat_key) DO UPDATE SET notes = voice_usages.notes + excluded.notes, seconds = voice_usages.seconds + excluded.seconds,
			chars = voice_usages.chars + excluded.chars, updated_at = excluded.updated_at`,
		chatKey, spent.Notes, spent.Seconds, spent.Chars, d.now()).Error)
}

// VoiceUsage returns what voice cost the chat so far.
func (d *DB) VoiceUsage(ctx context.Context, chatKey string) (voice.Spent, error) {
	var rows []voiceUsage
	err := d.db.WithContext(ctx).Where("chat_key = ?", chatKey).Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return voice.Spent{}, kind(err)
	}
	return voice.Spent{Notes: rows[0].Notes, Seconds: rows[0].Seconds, Chars: rows[0].Chars}, nil
}
