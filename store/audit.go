package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"loadout/chat"
)

// auditEntry is one decision on a call. The table is append-only: the
// application inserts rows and, past tools.audit_days, prunes them
// (PruneAudit), and nothing else; a trigger refuses any UPDATE, on SQLite
// and on PostgreSQL (TestAuditTrailIsAppendOnly).
type auditEntry struct {
	ID        int64     `gorm:"primaryKey;autoIncrement"`
	At        time.Time `gorm:"not null;index:idx_audit_at;index:idx_audit_user,priority:2"`
	ChatKey   string    `gorm:"not null;index:idx_audit_chat,priority:1"`
	UserKey   string    `gorm:"not null;default:'';index:idx_audit_user,priority:1"`
	SessionID int64     `gorm:"not null;uniqueIndex:idx_audit_call,priority:1"`
	CallID    string    `gorm:"not null;uniqueIndex:idx_audit_call,priority:2"`
	ToolName  string    `gorm:"not null"`
	Summary   string    `gorm:"not null"`
	Reach     string    `gorm:"not null;default:''"`
	ArgsHash  string    `gorm:"not null"`
	Tainted   bool      `gorm:"not null"`
	Decision  string    `gorm:"not null"`
	RuleCode  string    `gorm:"not null;default:''"`
	DecidedBy string    `gorm:"not null;default:''"`
	Outcome   string    `gorm:"not null;default:''"`
}

func (auditEntry) TableName() string { return "audit_entries" }

// auditGuards are the statements that make the audit table refuse
// updates, for SQLite and for PostgreSQL.
const (
	sqliteAuditGuard = `CREATE TRIGGER IF NOT EXISTS audit_entries_append_only BEFORE UPDATE ON audit_entries
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END`
	pgAuditGuardFunc = `CREATE OR REPLACE FUNCTION audit_entries_append_only() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION 'the audit trail is append-only'; END $$ LANGUAGE plpgsql`
	pgAuditGuardTrigger = `CREATE OR REPLACE TRIGGER audit_entries_append_only BEFORE UPDATE ON audit_entries
FOR EACH ROW EXECUTE FUNCTION audit_entries_append_only()`
)

func hashArgs(args string) string {
	sum := sha256.Sum256([]byte(args))
	return hex.EncodeToString(sum[:])
}

// appendAudit inserts entries; an entry for a call already recorded is
// dropped (a decision recorded again after a restart).
func appendAudit(tx *gorm.DB, now time.Time, entries ...chat.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([]auditEntry, len(entries))
	for i, e := range entries {
		at := e.At
		if at.IsZero() {
			at = now
		}
		rows[i] = auditEntry{At: at, ChatKey: e.ChatKey, UserKey: e.UserKey, SessionID: e.SessionID, CallID: e.CallID,
			ToolName: e.Tool, Summary: e.Summary, Reach: e.Reach, ArgsHash: e.ArgsHash, Tainted: e.Tainted, Decision: e.Decision,
			RuleCode: e.Rule, DecidedBy: e.DecidedBy, Outcome: e.Outcome}
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error
}

// Audit appends decisions to the audit trail.
func (d *DB) Audit(ctx context.Context, entries ...chat.AuditEntry) error {
	return kind(appendAudit(d.db.WithContext(ctx), d.now(), entries...))
}

// AuditLog returns the chat's newest decisions, newest first (every
// chat's when chatKey is ""): all of them when userKey is "", else those
// on that person's calls.
func (d *DB) AuditLog(ctx context.Context, chatKey, userKey string, limit int) ([]chat.AuditEntry, error) {
	q := d.db.WithContext(ctx)
	if chatKey != "" {
		q = q.Where("chat_key = ?", chatKey)
	}
	if userKey != "" {
		q = q.Where("user_key = ?", userKey)
	}
	var rows []auditEntry
	err := q.Order("at DESC, id DESC").Limit(limit).Find(&rows).Error
	out := make([]chat.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = chat.AuditEntry{At: r.At, ChatKey: r.ChatKey, UserKey: r.UserKey, SessionID: r.SessionID, CallID: r.CallID,
			Tool: r.ToolName, Summary: r.Summary, Reach: r.Reach, ArgsHash: r.ArgsHash, Tainted: r.Tainted, Decision: r.Decision,
			Rule: r.RuleCode, DecidedBy: r.DecidedBy, Outcome: r.Outcome}
	}
	return out, kind(err)
}

// PruneAudit deletes the decisions recorded before t (tools.audit_days):
// the one way rows leave the audit trail.
func (d *DB) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	res := d.db.WithContext(ctx).Where("at < ?", before).Delete(&auditEntry{})
	return res.RowsAffected, kind(res.Error)
}

// AuditPruner is the scheduler's chore that deletes the audit trail's
// decisions older than days (tools.audit_days; 365 when 0), logging
// what it pruned.
func (d *DB) AuditPruner(days int, log *slog.Logger) func(context.Context) {
	days = cmp.Or(days, 365)
	return func(ctx context.Context) {
		n, err := d.PruneAudit(ctx, time.Now().AddDate(0, 0, -days))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("cannot prune the audit trail", "err", err)
		case n > 0:
			log.Info("pruned the audit trail", "decisions", n, "older_than_days", days)
		}
	}
}
