package store

import (
	"context"
	"math"
	"slices"
	"time"

	"gorm.io/gorm"

	"loadout/chat"
)

var (
	_ chat.Ledger        = (*DB)(nil)
	_ chat.ChargingStore = (*DB)(nil)
)

// spend is what model calls cost a person in a chat on a day (in the
// limits' time zone, "2006-01-02"), added up by one UPSERT per call: the
// spend caps read it, and every replica writes the same rows. Its key
// leads with the person and the day, so a person's day or month is a
// range of it; idx_spends_chat serves a chat's day.
type spend struct {
	UserKey          string `gorm:"primaryKey"`
	Day              string `gorm:"primaryKey;index:idx_spends_chat,priority:2"`
	ChatKey          string `gorm:"primaryKey;index:idx_spends_chat,priority:1"`
	PromptTokens     int64  `gorm:"not null;default:0"`
	CompletionTokens int64  `gorm:"not null;default:0"`
	CachedTokens     int64  `gorm:"not null;default:0"`
	// CostNanos is the cost in billionths of the currency of llm.prices:
	// whole numbers add up exactly, and a token at 0.10 a million is 100.
	CostNanos int64 `gorm:"not null;default:0"`
	Calls     int64 `gorm:"not null;default:0"`
	UpdatedAt time.Time
}

func (spend) TableName() string { return "spends" }

// nanos is a cost in billionths, and back.
func nanos(cost float64) int64 { return int64(math.Round(cost * 1e9)) }
func cost(nanos int64) float64 { return float64(nanos) / 1e9 }

// chargeSpend adds to a row: one call (calls 1), or a settlement of a
// call a reservation counted already (calls 0).
const chargeSpend = `INSERT INTO spends (user_key, day, chat_key, prompt_tokens, completion_tokens, cached_tokens, cost_nanos, calls, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (user_key, day, chat_key) DO UPDATE SET prompt_tokens = spends.prompt_tokens + excluded.prompt_tokens,
		completion_tokens = spends.completion_tokens + excluded.completion_tokens, cached_tokens = spends.cached_tokens + excluded.cached_tokens,
		cost_nanos = spends.cost_nanos + excluded.cost_nanos, calls = spends.calls + excluded.calls, updated_at = excluded.updated_at`

// Charge adds what one model call cost to the person's row for the chat
// and day, in one statement.
func (d *DB) Charge(ctx context.Context, c chat.Charge) error {
	_, err := d.hotExec(ctx, nil, chargeSpend, chargeArgs(c, d.now())...)
	return kind(err)
}

// AppendCharged is Append with c added to the spend in its transaction:
// a round and what its model call cost are written together.
func (d *DB) AppendCharged(ctx context.Context, sessionID int64, msgs []chat.Message, usage chat.Usage, c chat.Charge, audit ...chat.AuditEntry) error {
	// Prepared before the transaction begins, as appendWith's own.
	d.prepareHot(ctx, chargeSpend)
	return d.appendWith(ctx, sessionID, msgs, usage, audit, func(tx *gorm.DB) error {
		_, err := d.hotExec(ctx, tx, chargeSpend, chargeArgs(c, d.now())...)
		return err
	})
}

// chargeArgs are chargeSpend's values for c, one call.
func chargeArgs(c chat.Charge, now time.Time) []any {
	return []any{c.UserKey, c.Day, c.ChatKey, c.Spend.PromptTokens, c.Spend.CompletionTokens, c.Spend.CachedTokens, nanos(c.Spend.Cost), 1, now}
}

// Reserve charges a hold for a model call before it is made
// (chat.Ledger): it reads what was spent, asks fit what to hold, and
// charges that as one call, in one transaction that no other Reserve of
// the person or the chat runs beside, in this process or another. On
// SQLite the transaction takes the database's write lock as it begins
// (_txlock=immediate); on PostgreSQL it takes an advisory lock of the
// person and one of the chat, always in the same order, held until it
// ends. A charge made without a reservation (a turn's) does not wait.
func (d *DB) Reserve(ctx context.Context, userKey, chatKey, day, monthStart string, fit func(chat.Spent) (chat.Spend, error)) error {
	// Prepared before the transaction begins (see prepareHot).
	d.prepareHot(ctx, chargeSpend, spentBoth)
	var refused error
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if d.pg {
			for _, k := range spendLocks(d.schema, userKey, chatKey) {
				if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", k).Error; err != nil {
					return err
				}
			}
		}
		s, err := d.spent(ctx, tx, userKey, chatKey, day, monthStart)
		if err != nil {
			return err
		}
		hold, err := fit(s)
		if err != nil {
			refused = err
			return err
		}
		c := chat.Charge{UserKey: userKey, ChatKey: chatKey, Day: day, Spend: hold}
		_, err = d.hotExec(ctx, tx, chargeSpend, chargeArgs(c, d.now())...)
		return err
	})
	if refused != nil {
		return refused
	}
	return kind(err)
}

// Settle replaces a hold Reserve charged with what the call cost
// (chat.Ledger), in one statement: the difference is added to the
// hold's row, and the call is not counted again.
func (d *DB) Settle(ctx context.Context, held chat.Charge, spent chat.Spend) error {
	h := held.Spend
	_, err := d.hotExec(ctx, nil, chargeSpend, held.UserKey, held.Day, held.ChatKey, spent.PromptTokens-h.PromptTokens,
		spent.CompletionTokens-h.CompletionTokens, spent.CachedTokens-h.CachedTokens, nanos(spent.Cost)-nanos(h.Cost), 0, d.now())
	return kind(err)
}

// spendLocks are the PostgreSQL advisory lock keys of a person's spend
// and a chat's (an empty key has none), in ascending order: every
// reservation takes them in this order, so two never wait on each other.
func spendLocks(schema, userKey, chatKey string) []int64 {
	var keys []int64
	for _, part := range [][2]string{{"person", userKey}, {"chat", chatKey}} {
		if part[1] == "" {
			continue
		}
		keys = append(keys, advisoryKey(schema, "loadout spends\x00"+part[0]+"\x00"+part[1]))
	}
	slices.Sort(keys)
	return keys
}

// The spend read: the person's rows of the month to day (a range of the
// key; part 0: the day's sums, then the range's) and the chat's rows of
// day (a range of idx_spends_chat; part 1), in one statement when both
// are read.
const (
	spentPerson = `SELECT 0,
	COALESCE(SUM(CASE WHEN day = ? THEN prompt_tokens END), 0), COALESCE(SUM(CASE WHEN day = ? THEN completion_tokens END), 0),
	COALESCE(SUM(CASE WHEN day = ? THEN cost_nanos END), 0),
	COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(cost_nanos), 0)
	FROM spends WHERE user_key = ? AND day >= ? AND day <= ?`
	spentChat = `SELECT 1, 0, 0, 0, COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(cost_nanos), 0)
	FROM spends WHERE chat_key = ? AND day = ?`
	spentBoth = spentPerson + "\n\tUNION ALL " + spentChat
)

// Spent returns the person's spend on day and from monthStart to day,
// and the chat's on day. An empty userKey or chatKey is not read (its
// part is zero): a turn reads only what a cap needs.
func (d *DB) Spent(ctx context.Context, userKey, chatKey, day, monthStart string) (chat.Spent, error) {
	s, err := d.spent(ctx, nil, userKey, chatKey, day, monthStart)
	return s, kind(err)
}

// spent is Spent in tx (nil: none).
func (d *DB) spent(ctx context.Context, tx *gorm.DB, userKey, chatKey, day, monthStart string) (chat.Spent, error) {
	var query string
	var args []any
	switch {
	case userKey != "" && chatKey != "":
		query, args = spentBoth, []any{day, day, day, userKey, monthStart, day, chatKey, day}
	case userKey != "":
		query, args = spentPerson, []any{day, day, day, userKey, monthStart, day}
	case chatKey != "":
		query, args = spentChat, []any{chatKey, day}
	default:
		return chat.Spent{}, nil
	}
	rows, err := d.hotQuery(ctx, tx, query, args...)
	if err != nil {
		return chat.Spent{}, err
	}
	defer rows.Close()
	var s chat.Spent
	// The person's row (part 0) and the chat's (part 1), in either order.
	for rows.Next() {
		var part int
		var dayIn, dayOut, dayCost, in, out, nanos int64
		if err := rows.Scan(&part, &dayIn, &dayOut, &dayCost, &in, &out, &nanos); err != nil {
			return chat.Spent{}, err
		}
		if part == 1 {
			s.ChatDay = chat.Spend{PromptTokens: in, CompletionTokens: out, Cost: cost(nanos)}
			continue
		}
		s.PersonDay = chat.Spend{PromptTokens: dayIn, CompletionTokens: dayOut, Cost: cost(dayCost)}
		s.PersonMonth = chat.Spend{PromptTokens: in, CompletionTokens: out, Cost: cost(nanos)}
	}
	return s, rows.Err()
}

// SpendQuery picks the spend SpendOver adds up: of a chat, of a person,
// or of a person in a chat (an empty key is any), on the days from From
// to To, both included ("2006-01-02" in the limits' time zone; empty is
// open).
type SpendQuery struct {
	ChatKey, UserKey string
	From, To         string
}

// SpendOver adds up the spend q picks: what the web console shows as a
// chat's or a person's cost over a period.
func (d *DB) SpendOver(ctx context.Context, q SpendQuery) (chat.Spend, error) {
	db := d.db.WithContext(ctx).Model(&spend{})
	if q.ChatKey != "" {
		db = db.Where("chat_key = ?", q.ChatKey)
	}
	if q.UserKey != "" {
		db = db.Where("user_key = ?", q.UserKey)
	}
	if q.From != "" {
		db = db.Where("day >= ?", q.From)
	}
	if q.To != "" {
		db = db.Where("day <= ?", q.To)
	}
	var row struct{ Prompt, Completion, Cached, Nanos int64 }
	err := db.Select(`COALESCE(SUM(prompt_tokens), 0) AS prompt, COALESCE(SUM(completion_tokens), 0) AS completion,
		COALESCE(SUM(cached_tokens), 0) AS cached, COALESCE(SUM(cost_nanos), 0) AS nanos`).Scan(&row).Error
	if err != nil {
		return chat.Spend{}, kind(err)
	}
	return chat.Spend{PromptTokens: row.Prompt, CompletionTokens: row.Completion, CachedTokens: row.Cached, Cost: cost(row.Nanos)}, nil
}
