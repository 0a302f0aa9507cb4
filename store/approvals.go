package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"loadout/chat"
	"loadout/tools"
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
	// Batch is the id of the first approval asked in the same question.
	Batch string `gorm:"not null;default:''"`
	// Offer is the scope "Always allow" takes, as JSON; "" for none.
	Offer string `gorm:"not null;default:''"`
	// Reach is what the call reaches (tools.Reach.String).
	Reach string `gorm:"not null;default:''"`
	// Delegate is the sub-agent whose call it is (chat.Approval.Delegate);
	// "" for the chat's own turn.
	Delegate string `gorm:"not null;default:''"`
}

func (approvalRow) TableName() string { return "approvals" }

func (r approvalRow) domain() chat.Approval {
	a := chat.Approval{ID: r.ID, ChatKey: r.ChatKey, SessionID: r.SessionID, UserKey: r.UserKey, CallID: r.CallID,
		Tool: r.ToolName, Arguments: r.Arguments, Summary: r.Summary, Tainted: r.Tainted, Status: r.Status, DecidedBy: r.DecidedBy,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, Batch: r.Batch, Reach: r.Reach, Delegate: r.Delegate}
	if r.Offer != "" {
		var s tools.Scope
		if json.Unmarshal([]byte(r.Offer), &s) == nil {
			a.Offer = &s
		}
	}
	return a
}

// Hold persists a round with held calls and their approvals in one
// transaction.
func (d *DB) Hold(ctx context.Context, sessionID int64, msgs []chat.Message, usage chat.Usage, asks []chat.Approval, audit ...chat.AuditEntry) error {
	rows := make([]approvalRow, len(asks))
	now := d.now()
	for i, a := range asks {
		rows[i] = approvalRow{ID: a.ID, ChatKey: a.ChatKey, SessionID: sessionID, UserKey: a.UserKey, CallID: a.CallID,
			ToolName: a.Tool, Arguments: a.Arguments, Summary: a.Summary, Tainted: a.Tainted, Status: chat.ApprovalPending,
			CreatedAt: now.Add(time.Duration(i) * time.Microsecond), ExpiresAt: a.ExpiresAt, Batch: a.Batch, Reach: a.Reach, Delegate: a.Delegate}
		if a.Offer != nil {
			b, err := json.Marshal(a.Offer)
			if err != nil {
				return fmt.Errorf("encode the offer of approval %s: %w", a.ID, err)
			}
			rows[i].Offer = string(b)
		}
	}
	return d.appendWith(ctx, sessionID, msgs, usage, audit, func(tx *gorm.DB) error { return tx.Create(&rows).Error })
}

// Batch returns the approvals asked in one question, in the order they
// were asked.
func (d *DB) Batch(ctx context.Context, chatKey, batch string) ([]chat.Approval, error) {
	var rows []approvalRow
	err := d.db.WithContext(ctx).Where("chat_key = ? AND batch = ?", chatKey, batch).Order("created_at, id").Find(&rows).Error
	out := make([]chat.Approval, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, kind(err)
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
// result, and records the decision in the audit trail, in one
// transaction.
func (d *DB) Resolve(ctx context.Context, sessionID int64, callID string, m chat.Message, entry chat.AuditEntry) error {
	return kind(d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&message{}).
			Where("session_id = ? AND tool_call_id = ? AND role = ?", sessionID, callID, string(chat.RoleTool)).
			Updates(map[string]any{"text": m.Text, "status": m.Status, "code": m.Code, "tokens": m.Tokens, "user_key": m.UserKey})
		if res.Error == nil && res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		if res.Error != nil {
			return res.Error
		}
		return appendAudit(tx, d.now(), entry)
	}))
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
// is cleared), and records each in the audit trail.
func cancelApprovals(tx *gorm.DB, chatKey string, now time.Time) error {
	var rows []approvalRow
	if err := tx.Where("chat_key = ? AND status = ?", chatKey, chat.ApprovalPending).Find(&rows).Error; err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	if err := tx.Model(&approvalRow{}).Where("chat_key = ? AND status = ?", chatKey, chat.ApprovalPending).
		Updates(map[string]any{"status": chat.ApprovalCancelled, "decided_at": &now}).Error; err != nil {
		return err
	}
	entries := make([]chat.AuditEntry, len(rows))
	for i, r := range rows {
		entries[i] = chat.AuditEntry{ChatKey: r.ChatKey, UserKey: r.UserKey, SessionID: r.SessionID, CallID: r.CallID,
			Tool: r.ToolName, Summary: r.Summary, Reach: r.Reach, ArgsHash: hashArgs(r.Arguments), Tainted: r.Tainted, Decision: chat.AuditCancelled}
	}
	return appendAudit(tx, now, entries...)
}
