package store

import (
	"context"
	"errors"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// googleToken is one person's Google account, sealed (AES-256-GCM) by the
// google package; the store never sees it in clear.
type googleToken struct {
	UserKey   string `gorm:"primaryKey"`
	Sealed    []byte `gorm:"not null"`
	UpdatedAt int64  `gorm:"autoUpdateTime:false"`
}

// GoogleToken returns the sealed Google account of userKey, or nil when
// none is stored.
func (d *DB) GoogleToken(ctx context.Context, userKey string) ([]byte, error) {
	var t googleToken
	err := d.db.WithContext(ctx).Where("user_key = ?", userKey).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return t.Sealed, nil
}

// SaveGoogleToken stores the sealed Google account of userKey, replacing
// any earlier one.
func (d *DB) SaveGoogleToken(ctx context.Context, userKey string, sealed []byte) error {
	return d.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).
		Create(&googleToken{UserKey: userKey, Sealed: sealed, UpdatedAt: d.now().Unix()}).Error
}

// DeleteGoogleToken removes the Google account of userKey, if any.
func (d *DB) DeleteGoogleToken(ctx context.Context, userKey string) error {
	return d.db.WithContext(ctx).Where("user_key = ?", userKey).Delete(&googleToken{}).Error
}
