package store

import (
	"context"
	"strconv"
	"time"

	"gorm.io/gorm/clause"
)

// Telegram inbox states.
const (
	telegramPending  = "pending"
	telegramAnswered = "answered"
	telegramDone     = "done"
)

// telegramOffsetKey is the state key of the Telegram update offset.
const telegramOffsetKey = "telegram:offset"

// telegramInbox is one accepted Telegram update, kept from the moment it is
// acknowledged until its reply is sent. The update id is the primary key,
// so a redelivered update is recognised and never handled twice.
type telegramInbox struct {
	UpdateID int64  `gorm:"primaryKey;autoIncrement:false"`
	ChatKey  string `gorm:"not null"`
	UserKey  string `gorm:"not null"`
	Text     string
	// Route is the channel's own description of where the reply goes.
	Route string
	// Reply is the answer, stored before it is sent so a restart sends it
	// without running the turn again.
	Reply     string
	State     string `gorm:"not null;index"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TelegramOffset returns the next update id to ask Telegram for, or 0 if
// none was stored.
func (d *DB) TelegramOffset(ctx context.Context) (int64, error) {
	v, err := d.State(ctx, telegramOffsetKey)
	if err != nil || v == "" {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// TelegramSetOffset stores the next update id to ask for. Handled updates
// below it can never be delivered again, so their inbox rows are removed.
func (d *DB) TelegramSetOffset(ctx context.Context, offset int64) error {
	if err := d.SetState(ctx, telegramOffsetKey, strconv.FormatInt(offset, 10)); err != nil {
		return err
	}
	return d.db.WithContext(ctx).
		Where("update_id < ? AND state = ?", offset, telegramDone).
		Delete(&telegramInbox{}).Error
}

// TelegramAccept stores an inbound update as pending. It reports false,
// changing nothing, when the update id is already stored.
func (d *DB) TelegramAccept(ctx context.Context, updateID int64, chatKey, userKey, text, route string) (bool, error) {
	now := d.now()
	res := d.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&telegramInbox{
		UpdateID: updateID, ChatKey: chatKey, UserKey: userKey, Text: text, Route: route,
		State: telegramPending, CreatedAt: now, UpdatedAt: now,
	})
	if res.Error != nil {
		return false, res.Error
	}
	return res.RowsAffected == 1, nil
}

// TelegramPending calls fn for every update whose reply was not sent yet,
// in update id order. reply is empty unless the answer is already known.
func (d *DB) TelegramPending(ctx context.Context, fn func(updateID int64, chatKey, userKey, text, route, reply string)) error {
	var rows []telegramInbox
	if err := d.db.WithContext(ctx).Where("state <> ?", telegramDone).
		Order("update_id").Find(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		fn(r.UpdateID, r.ChatKey, r.UserKey, r.Text, r.Route, r.Reply)
	}
	return nil
}

// TelegramAnswered stores the reply of an update that is about to be sent.
func (d *DB) TelegramAnswered(ctx context.Context, updateID int64, reply string) error {
	return d.db.WithContext(ctx).Model(&telegramInbox{}).Where("update_id = ?", updateID).
		Updates(map[string]any{"reply": reply, "state": telegramAnswered, "updated_at": d.now()}).Error
}

// TelegramDone marks an update as handled: its reply was sent, or will
// never be.
func (d *DB) TelegramDone(ctx context.Context, updateID int64) error {
	return d.db.WithContext(ctx).Model(&telegramInbox{}).Where("update_id = ?", updateID).
		Updates(map[string]any{"state": telegramDone, "updated_at": d.now()}).Error
}
