package store

import (
	"context"
	"errors"

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
