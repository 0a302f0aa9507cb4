package store

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// mcpToken is one person's sign-in to a remote MCP server, sealed
// (AES-256-GCM, with the Google token key) by the mcp package; the store
// never sees it in clear. An operator-wide sign-in has the user key "".
type mcpToken struct {
	Server    string `gorm:"primaryKey"`
	UserKey   string `gorm:"primaryKey"`
	Sealed    []byte `gorm:"not null"`
	UpdatedAt int64  `gorm:"autoUpdateTime:false"`
}

func (mcpToken) TableName() string { return "mcp_tokens" }

// MCPToken returns the sealed sign-in of userKey to server, or nil when
// none is stored.
func (d *DB) MCPToken(ctx context.Context, server, userKey string) ([]byte, error) {
	var t mcpToken
	err := d.db.WithContext(ctx).Where("server = ? AND user_key = ?", server, userKey).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, kind(err)
	}
	return t.Sealed, nil
}

// SaveMCPToken stores the sealed sign-in of userKey to server, replacing
// any earlier one.
func (d *DB) SaveMCPToken(ctx context.Context, server, userKey string, sealed []byte) error {
	return kind(d.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).
		Create(&mcpToken{Server: server, UserKey: userKey, Sealed: sealed, UpdatedAt: d.now().Unix()}).Error)
}

// DeleteMCPToken removes the sign-in of userKey to server, if any.
func (d *DB) DeleteMCPToken(ctx context.Context, server, userKey string) error {
	return kind(d.db.WithContext(ctx).Where("server = ? AND user_key = ?", server, userKey).Delete(&mcpToken{}).Error)
}

// mcpSignIn is a sign-in link to an MCP server that has not come back
// yet, by the hash of its state, sealed by the mcp package (it holds
// PKCE's verifier and the client's secret): whichever process the
// authorization server sends the person back to finishes it.
type mcpSignIn struct {
	ID      string `gorm:"primaryKey"`
	Sealed  []byte `gorm:"not null"`
	Expires int64  `gorm:"not null;index"`
}

func (mcpSignIn) TableName() string { return "mcp_sign_ins" }

// SaveMCPSignIn stores a pending sign-in until expires, and forgets the
// expired ones.
func (d *DB) SaveMCPSignIn(ctx context.Context, id string, sealed []byte, expires time.Time) error {
	db := d.db.WithContext(ctx)
	if err := db.Where("expires < ?", d.now().Unix()).Delete(&mcpSignIn{}).Error; err != nil {
		return kind(err)
	}
	return kind(db.Create(&mcpSignIn{ID: id, Sealed: sealed, Expires: expires.Unix()}).Error)
}

// TakeMCPSignIn removes a pending sign-in and returns it: once only,
// whichever process asks first. It returns nil when there is none.
func (d *DB) TakeMCPSignIn(ctx context.Context, id string) ([]byte, time.Time, error) {
	var row mcpSignIn
	res := d.db.WithContext(ctx).Clauses(clause.Returning{}).Where("id = ?", id).Delete(&row)
	if res.Error != nil || res.RowsAffected == 0 {
		return nil, time.Time{}, kind(res.Error)
	}
	return row.Sealed, time.Unix(row.Expires, 0), nil
}
