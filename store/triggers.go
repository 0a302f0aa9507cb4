package store

import (
	"context"
	"encoding/json"
	"time"

	"loadout/bridge/triggers"
)

var _ triggers.Store = (*DB)(nil)

// trigger is a trigger a person made (/trigger new).
type trigger struct {
	Name    string `gorm:"primaryKey"`
	ChatKey string `gorm:"not null"`
	UserKey string `gorm:"not null;index:idx_triggers_user"`
	// Secret signs the trigger's requests; it is needed as it is to
	// check them.
	Secret string `gorm:"not null"`
	Prompt string `gorm:"not null"`
	// Groups are the groups its turns start with, a JSON array.
	Groups    string `gorm:"not null;default:''"`
	CreatedAt time.Time
}

func (trigger) TableName() string { return "triggers" }

func (r trigger) trigger() triggers.Trigger {
	t := triggers.Trigger{Name: r.Name, Secret: r.Secret, Chat: r.ChatKey, User: r.UserKey, Prompt: r.Prompt, Made: r.CreatedAt}
	if r.Groups != "" {
		_ = json.Unmarshal([]byte(r.Groups), &t.Groups) // a row this package wrote
	}
	return t
}

// SaveTrigger keeps a trigger a person made; triggers.ErrTaken when the
// name is another's.
func (d *DB) SaveTrigger(ctx context.Context, t triggers.Trigger) error {
	row := trigger{Name: t.Name, ChatKey: t.Chat, UserKey: t.User, Secret: t.Secret, Prompt: t.Prompt, CreatedAt: d.now()}
	if len(t.Groups) > 0 {
		b, _ := json.Marshal(t.Groups) // strings always encode
		row.Groups = string(b)
	}
	err := d.db.WithContext(ctx).Create(&row).Error
	if duplicate(err) {
		return triggers.ErrTaken
	}
	return kind(err)
}

// Trigger returns the trigger named name.
func (d *DB) Trigger(ctx context.Context, name string) (triggers.Trigger, error) {
	var r trigger
	if err := d.db.WithContext(ctx).Where("name = ?", name).Take(&r).Error; err != nil {
		return triggers.Trigger{}, kind(err)
	}
	return r.trigger(), nil
}

// Triggers returns the triggers userKey made, by name.
func (d *DB) Triggers(ctx context.Context, userKey string) ([]triggers.Trigger, error) {
	var rows []trigger
	if err := d.db.WithContext(ctx).Where("user_key = ?", userKey).Order("name").Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]triggers.Trigger, len(rows))
	for i, r := range rows {
		out[i] = r.trigger()
	}
	return out, nil
}

// RemoveTrigger removes userKey's trigger named name.
func (d *DB) RemoveTrigger(ctx context.Context, userKey, name string) (bool, error) {
	res := d.db.WithContext(ctx).Where("name = ? AND user_key = ?", name, userKey).Delete(&trigger{})
	return res.RowsAffected > 0, kind(res.Error)
}
