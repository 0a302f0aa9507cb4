package store

import (
	"context"
	"errors"
	"time"

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

// googleState is a /connect google link that has not come back yet,
// sealed by the google package, so it survives a restart.
type googleState struct {
	State   string `gorm:"primaryKey"`
	Sealed  []byte `gorm:"not null"`
	Expires int64  `gorm:"not null;index"`
}

// SaveGoogleState stores a pending connect link until expires, and
// forgets the expired ones.
func (d *DB) SaveGoogleState(ctx context.Context, state string, sealed []byte, expires time.Time) error {
	db := d.db.WithContext(ctx)
	if err := db.Where("expires < ?", d.now().Unix()).Delete(&googleState{}).Error; err != nil {
		return err
	}
	return db.Create(&googleState{State: state, Sealed: sealed, Expires: expires.Unix()}).Error
}

// TakeGoogleState removes a pending connect link and returns it: once
// only, whoever asks first. It returns nil when there is none.
func (d *DB) TakeGoogleState(ctx context.Context, state string) ([]byte, time.Time, error) {
	var row googleState
	res := d.db.WithContext(ctx).Clauses(clause.Returning{}).Where("state = ?", state).Delete(&row)
	if res.Error != nil || res.RowsAffected == 0 {
		return nil, time.Time{}, res.Error
	}
	return row.Sealed, time.Unix(row.Expires, 0), nil
}
