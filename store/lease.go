package store

import (
	"context"
	"time"

	"gorm.io/gorm/clause"
)

// leaseRow is a duty only one process may hold at a time (polling
// Telegram, running the scheduler), until ExpiresAt (Unix milliseconds)
// unless its holder renews it.
type leaseRow struct {
	Name      string `gorm:"primaryKey"`
	Holder    string `gorm:"not null"`
	ExpiresAt int64  `gorm:"not null"`
}

func (leaseRow) TableName() string { return "leases" }

// TakeLease makes holder the owner of lease name for ttl from now, when
// the lease is free, expired or holder's already (a renewal), and reports
// whether holder owns it.
func (d *DB) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := d.now()
	until := now.Add(ttl).UnixMilli()
	res := d.db.WithContext(ctx).Model(&leaseRow{}).
		Where("name = ? AND (holder = ? OR expires_at < ?)", name, holder, now.UnixMilli()).
		Updates(map[string]any{"holder": holder, "expires_at": until})
	if res.Error != nil {
		return false, kind(res.Error)
	}
	if res.RowsAffected == 1 {
		return true, nil
	}
	res = d.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&leaseRow{Name: name, Holder: holder, ExpiresAt: until})
	return res.RowsAffected == 1, kind(res.Error)
}

// ReleaseLease gives lease name up, if holder holds it, so another
// process need not wait for it to expire.
func (d *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	return kind(d.db.WithContext(ctx).Where("name = ? AND holder = ?", name, holder).Delete(&leaseRow{}).Error)
}
