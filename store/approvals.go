package store

import (
	"context"
	"time"

	"gorm.io/gorm"

	"loadout/chat"
)

// approvalRow is a tool call held for the person's approval.
type approvalRow struct {
	ID        string `gorm:"primaryKey"`
	ChatKey   string `gorm:"not null;index:idx_approvals_chat"`
	SessionID int64
	UserKey   string
	CallID    string
	ToolName  string
	Arguments string
	Summary   string
	// Tainted: the turn that asked had read untrusted content.
	Tainted   bool
	Status    string `gorm:"not null"`
	DecidedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	DecidedAt *time.Time
}

func (approvalRow) TableName() string { return "approvals" }

func (r approvalRow) domain() chat.Approval {
	return chat.Approval{ID: r.ID, ChatKey: r.ChatKey, SessionID: r.SessionID, UserKey: r.UserKey, CallID: r.CallID,
		Tool: r.ToolName, Arguments: r.Arguments, Summary: r.Summary, Tainted: r.Tainted, Status: r.Status, DecidedBy: r.DecidedBy,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
}

// Hold persists a round with a held call and its approval in one
// transaction.
func (d *DB) Hold(ctx context.Context, sessionID int64, msgs []chat.Message, usage chat.Usage, a chat.Approval) error {
	row := approvalRow{ID: a.ID, ChatKey: a.ChatKey, SessionID: sessionID, UserKey: a.UserKey, CallID: a.CallID,
		ToolName: a.Tool, Arguments: a.Arguments, Summary: a.Summary, Tainted: a.Tainted, Status: chat.ApprovalPending,
		CreatedAt: d.now(), ExpiresAt: a.ExpiresAt}
	return d.appendWith(ctx, sessionID, msgs, usage, func(tx *gorm.DB) error { return tx.Create(&row).Error })
}

// Approval returns the approval of chatKey whose id is ref or, for a
// shorter ref (the code a person types), the newest whose id begins with
// it. ref holds only the letters and digits of ids.
func (d *DB) Approval(ctx context.Context, chatKey, ref string) (chat.Approval, error) {
	var r approvalRow
	q := d.db.WithContext(ctx).Where("chat_key = ? AND (id = ? OR id LIKE ?)", chatKey, ref, ref+"%").Order("created_at DESC")
	if ref == "" {
		return chat.Approval{}, kind(gorm.ErrRecordNotFound)
	}
	if err := q.Take(&r).Error; err != nil {
		return chat.Approval{}, kind(err)
	}
	return r.domain(), nil
}

// Decide moves approval id from one status to another, once.
func (d *DB) Decide(ctx context.Context, id, from, to, event string) (bool, error) {
	now := d.now()
	res := d.db.WithContext(ctx).Model(&approvalRow{}).Where("id = ? AND status = ?", id, from).
		Updates(map[string]any{"status": to, "decided_by": event, "decided_at": &now})
	return res.RowsAffected == 1, kind(res.Error)
}

// Resolve replaces the pending tool message of a held call with its
// result.
func (d *DB) Resolve(ctx context.Context, sessionID int64, callID string, m chat.Message) error {
	res := d.db.WithContext(ctx).Model(&message{}).
		Where("session_id = ? AND tool_call_id = ? AND role = ?", sessionID, callID, string(chat.RoleTool)).
		Updates(map[string]any{"text": m.Text, "status": m.Status, "code": m.Code, "tokens": m.Tokens, "user_key": m.UserKey})
	if res.Error == nil && res.RowsAffected == 0 {
		return kind(gorm.ErrRecordNotFound)
	}
	return kind(res.Error)
}

// PendingApprovals returns the chat's approvals still waiting and not
// expired, newest first.
func (d *DB) PendingApprovals(ctx context.Context, chatKey string) ([]chat.Approval, error) {
	var rows []approvalRow
	err := d.db.WithContext(ctx).Where("chat_key = ? AND status = ? AND expires_at > ?", chatKey, chat.ApprovalPending, d.now()).
		Order("created_at DESC").Find(&rows).Error
	out := make([]chat.Approval, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, kind(err)
}

// cancelApprovals cancels the chat's pending approvals (the conversation
// is cleared).
func cancelApprovals(tx *gorm.DB, chatKey string, now time.Time) error {
	return tx.Model(&approvalRow{}).Where("chat_key = ? AND status = ?", chatKey, chat.ApprovalPending).
		Updates(map[string]any{"status": chat.ApprovalCancelled, "decided_at": &now}).Error
}
