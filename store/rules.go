package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"loadout/tools"
)

// rule is a person's own rule ("Always allow").
type rule struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	UserKey   string `gorm:"not null;uniqueIndex:idx_rules_code,priority:1"`
	Code      string `gorm:"not null;uniqueIndex:idx_rules_code,priority:2"`
	Decision  string `gorm:"not null"`
	Scope     string `gorm:"not null"` // tools.Scope as JSON
	CreatedAt time.Time
}

func (rule) TableName() string { return "rules" }

// Rules returns the person's rules, oldest first.
func (d *DB) Rules(ctx context.Context, userKey string) ([]tools.Rule, error) {
	var rows []rule
	if err := d.db.WithContext(ctx).Where("user_key = ?", userKey).Order("id").Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]tools.Rule, 0, len(rows))
	for _, r := range rows {
		var s tools.Scope
		if err := json.Unmarshal([]byte(r.Scope), &s); err != nil {
			return nil, fmt.Errorf("rule %s of %s: unreadable scope: %w", r.Code, r.UserKey, err)
		}
		out = append(out, tools.Rule{Code: r.Code, Owner: r.UserKey, Scope: s, Decision: r.Decision})
	}
	return out, nil
}

// AddRule keeps a person's rule.
func (d *DB) AddRule(ctx context.Context, r tools.Rule) error {
	b, err := json.Marshal(r.Scope)
	if err != nil {
		return fmt.Errorf("encode the scope of rule %s: %w", r.Code, err)
	}
	return kind(d.db.WithContext(ctx).Create(&rule{UserKey: r.Owner, Code: r.Code, Decision: r.Decision, Scope: string(b), CreatedAt: d.now()}).Error)
}

// RemoveRule removes the person's rule with code.
func (d *DB) RemoveRule(ctx context.Context, userKey, code string) (bool, error) {
	res := d.db.WithContext(ctx).Where("user_key = ? AND code = ?", userKey, code).Delete(&rule{})
	return res.RowsAffected == 1, kind(res.Error)
}
