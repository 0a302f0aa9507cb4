package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools"
	"loadout/tools/schedule"
	"loadout/ui"
)

var _ ui.Store = (*DB)(nil)

// webSession is a browser signed in to the web console, by the hash of
// its cookie.
type webSession struct {
	ID        string `gorm:"primaryKey"`
	UserKey   string `gorm:"not null;index"`
	Admin     bool   `gorm:"not null;default:false"`
	CSRF      string `gorm:"not null"`
	CreatedAt time.Time
	ExpiresAt time.Time `gorm:"index"`
}

func (webSession) TableName() string { return "web_sessions" }

// webLink is a one-time sign-in link, by the hash of its secret.
type webLink struct {
	ID        string `gorm:"primaryKey"`
	UserKey   string `gorm:"not null"`
	ExpiresAt time.Time
}

func (webLink) TableName() string { return "web_links" }

// trafficHour is a channel's messages and tokens in one hour, counted
// from the messages once (see Traffic).
type trafficHour struct {
	Hour     int64  `gorm:"primaryKey;autoIncrement:false"`
	Channel  string `gorm:"primaryKey"`
	Messages int64  `gorm:"not null;default:0"`
	Tokens   int64  `gorm:"not null;default:0"`
}

func (trafficHour) TableName() string { return "traffic_hours" }

// webPerson is someone who wrote to loadout, counted with the traffic.
type webPerson struct {
	UserKey  string    `gorm:"primaryKey"`
	Messages int64     `gorm:"not null;default:0"`
	LastSeen time.Time `gorm:"index"`
}

func (webPerson) TableName() string { return "web_people" }

// personIndexes find the sessions a person wrote in (the web console's
// pages of one person) and the people of a page of sessions, from the
// index alone: user messages only, a quarter of the rows.
var personIndexes = []string{
	`CREATE INDEX IF NOT EXISTS idx_messages_user ON messages(user_key, session_id) WHERE role = 'user'`,
	`CREATE INDEX IF NOT EXISTS idx_messages_people ON messages(session_id, user_key) WHERE role = 'user'`,
}

// trafficMark is the state key of the last message counted in
// traffic_hours and people.
const trafficMark = "traffic:last_message"

// CreateWebSession stores a signed-in browser.
func (d *DB) CreateWebSession(ctx context.Context, s ui.Session) error {
	row := webSession{ID: s.ID, UserKey: s.UserKey, Admin: s.Admin, CSRF: s.CSRF, CreatedAt: s.CreatedAt.UTC(), ExpiresAt: s.ExpiresAt.UTC()}
	return kind(d.db.WithContext(ctx).Create(&row).Error)
}

// WebSession is the session of id, expired or not.
func (d *DB) WebSession(ctx context.Context, id string) (ui.Session, error) {
	var r webSession
	if err := d.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return ui.Session{}, kind(err)
	}
	return ui.Session{ID: r.ID, UserKey: r.UserKey, Admin: r.Admin, CSRF: r.CSRF, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}, nil
}

// DeleteWebSession signs a browser out (and forgets the expired ones).
func (d *DB) DeleteWebSession(ctx context.Context, id string) error {
	return kind(d.db.WithContext(ctx).Where("id = ? OR expires_at < ?", id, d.now()).Delete(&webSession{}).Error)
}

// DeleteUserWebSessions signs a person out of every browser.
func (d *DB) DeleteUserWebSessions(ctx context.Context, userKey string) (int64, error) {
	res := d.db.WithContext(ctx).Where("user_key = ?", userKey).Delete(&webSession{})
	return res.RowsAffected, kind(res.Error)
}

// CreateWebLink stores a sign-in link by its hash, and forgets expired ones.
func (d *DB) CreateWebLink(ctx context.Context, id, userKey string, expires time.Time) error {
	return kind(d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("expires_at < ?", d.now()).Delete(&webLink{}).Error; err != nil {
			return err
		}
		return tx.Create(&webLink{ID: id, UserKey: userKey, ExpiresAt: expires.UTC()}).Error
	}))
}

// TakeWebLink deletes the link and returns it: whoever deletes it first
// has it, so a link works once even with several processes.
func (d *DB) TakeWebLink(ctx context.Context, id string) (string, time.Time, error) {
	var r webLink
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", id).Take(&r).Error; err != nil {
			return err
		}
		res := tx.Where("id = ?", id).Delete(&webLink{})
		if res.Error == nil && res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		return res.Error
	})
	if err != nil {
		return "", time.Time{}, kind(err)
	}
	return r.UserKey, r.ExpiresAt, nil
}

// Chats is a page of the chats with an open session, by chat key after
// after. With userKey, only the chats the person wrote in. Their people
// and loaded groups come in two more queries for the whole page.
func (d *DB) Chats(ctx context.Context, userKey, after string, limit int) ([]ui.Chat, error) {
	var rows []session
	q := d.db.WithContext(ctx).Where("closed_at IS NULL AND chat_key > ?", after)
	if userKey != "" {
		// role is written out, not bound: SQLite uses a partial index
		// only when the query's own text implies its condition.
		q = q.Where("id IN (?)", d.db.Model(&message{}).Select("session_id").Where("role = 'user' AND user_key = ?", userKey))
	}
	if err := q.Order("chat_key").Limit(limit).Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	return d.chats(ctx, rows)
}

// OpenSessionOf is the chat's open session with its people and groups.
func (d *DB) OpenSessionOf(ctx context.Context, chatKey string) (ui.Chat, error) {
	var rows []session
	if err := d.db.WithContext(ctx).Where("closed_at IS NULL AND chat_key = ?", chatKey).Limit(1).Find(&rows).Error; err != nil {
		return ui.Chat{}, kind(err)
	}
	if len(rows) == 0 {
		return ui.Chat{}, errNotFound
	}
	out, err := d.chats(ctx, rows)
	if err != nil {
		return ui.Chat{}, err
	}
	return out[0], nil
}

func (d *DB) chats(ctx context.Context, rows []session) ([]ui.Chat, error) {
	out := make([]ui.Chat, len(rows))
	at := make(map[int64]int, len(rows))
	ids := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = ui.Chat{ChatKey: r.ChatKey, SessionID: r.ID, OpenedAt: r.OpenedAt, Messages: r.Messages,
			PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens}
		at[r.ID], ids[i] = i, r.ID
	}
	if len(ids) == 0 {
		return out, nil
	}
	var people []struct {
		SessionID int64
		UserKey   string
	}
	if err := d.db.WithContext(ctx).Model(&message{}).Select("DISTINCT session_id, user_key").
		Where("session_id IN ? AND role = 'user' AND user_key <> ''", ids).Order("session_id, user_key").Scan(&people).Error; err != nil {
		return nil, kind(err)
	}
	for _, p := range people {
		out[at[p.SessionID]].People = append(out[at[p.SessionID]].People, p.UserKey)
	}
	var changes []struct {
		ID           int64
		SessionID    int64
		GroupChanges string
	}
	if err := d.db.WithContext(ctx).Model(&message{}).Select("id, session_id, group_changes").
		Where("session_id IN ? AND tool_name IN ? AND status = ? AND group_changes <> ''", ids, groupChangers[:], tools.StatusSuccess).
		Scan(&changes).Error; err != nil {
		return nil, kind(err)
	}
	slices.SortFunc(changes, func(a, b struct {
		ID           int64
		SessionID    int64
		GroupChanges string
	}) int {
		return int(a.ID - b.ID)
	})
	for _, c := range changes {
		decoded, err := decodeGroups(c.GroupChanges)
		if err != nil {
			return nil, fmt.Errorf("decode group changes of message %d: %w", c.ID, err)
		}
		i := at[c.SessionID]
		out[i].Groups = tools.ApplyGroupChanges(out[i].Groups, decoded)
	}
	return out, nil
}

// ChatCount is how many chats have an open session.
func (d *DB) ChatCount(ctx context.Context) (int64, error) {
	var n int64
	err := d.db.WithContext(ctx).Model(&session{}).Where("closed_at IS NULL").Count(&n).Error
	return n, kind(err)
}

// InChat reports whether the person wrote in the chat's open session.
func (d *DB) InChat(ctx context.Context, chatKey, userKey string) (bool, error) {
	var n int64
	err := d.db.WithContext(ctx).Model(&message{}).
		Where("session_id IN (?) AND role = 'user' AND user_key = ?",
			d.db.Model(&session{}).Select("id").Where("chat_key = ? AND closed_at IS NULL", chatKey), userKey).
		Limit(1).Count(&n).Error
	return n > 0, kind(err)
}

// Approvals are the newest approvals (the pending, unexpired ones only
// when pending), userKey "" everyone's.
func (d *DB) Approvals(ctx context.Context, userKey string, pending bool, limit int) ([]chat.Approval, error) {
	var rows []approvalRow
	q := d.db.WithContext(ctx)
	if userKey != "" {
		q = q.Where("user_key = ?", userKey)
	}
	if pending {
		q = q.Where("status = ? AND expires_at > ?", chat.ApprovalPending, d.now())
	} else {
		q = q.Where("status <> ?", chat.ApprovalPending)
	}
	if err := q.Order("created_at DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]chat.Approval, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// ApprovalByID is one approval by its full id.
func (d *DB) ApprovalByID(ctx context.Context, id string) (chat.Approval, error) {
	var r approvalRow
	if err := d.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return chat.Approval{}, kind(err)
	}
	return r.domain(), nil
}

// trafficBatch is how many messages one step of Traffic counts, and
// trafficSteps how many steps one call takes at most: a database with
// millions of messages never counted (one upgraded to this version) is
// counted over several views, each well within the server's write
// timeout, rather than in one.
const (
	trafficBatch = 20000
	trafficSteps = 10
)

// Traffic brings the hourly totals up to date with the messages written
// since the last call (by id, through the primary key: each message is
// counted once, in one transaction with the mark) and returns those
// since since. A busy deployment's new messages are a few per call; a
// database that never had them counted is counted once, in batches, at
// most trafficSteps of them a call.
func (d *DB) Traffic(ctx context.Context, since time.Time) ([]ui.TrafficHour, error) {
	for range trafficSteps {
		more, err := d.countTraffic(ctx)
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	var rows []trafficHour
	if err := d.db.WithContext(ctx).Where("hour >= ?", since.Unix()/3600).Order("hour, channel").Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]ui.TrafficHour, len(rows))
	for i, r := range rows {
		out[i] = ui.TrafficHour{Hour: time.Unix(r.Hour*3600, 0).UTC(), Channel: r.Channel, Messages: r.Messages, Tokens: r.Tokens}
	}
	return out, nil
}

// countTraffic counts one batch of new messages; more reports that
// others wait.
func (d *DB) countTraffic(ctx context.Context) (more bool, err error) {
	err = d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var mark state
		var last int64
		if err := tx.Where("key = ?", trafficMark).Limit(1).Find(&mark).Error; err != nil {
			return err
		}
		fmt.Sscan(mark.Value, &last)
		var msgs []struct {
			ID        int64
			Role      string
			UserKey   string
			Tokens    int64
			CreatedAt time.Time
			ChatKey   string
		}
		if err := tx.Table("messages").Select("messages.id, messages.role, messages.user_key, "+
			"COALESCE(messages.prompt_tokens, 0) + COALESCE(messages.completion_tokens, 0) AS tokens, messages.created_at, sessions.chat_key").
			Joins("JOIN sessions ON sessions.id = messages.session_id").
			Where("messages.id > ?", last).Order("messages.id").Limit(trafficBatch).Scan(&msgs).Error; err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		more = len(msgs) == trafficBatch
		hours := map[[2]any]*trafficHour{}
		people := map[string]*webPerson{}
		for _, m := range msgs {
			channel, _, _ := strings.Cut(m.ChatKey, ":")
			h := m.CreatedAt.Unix() / 3600
			k := [2]any{h, channel}
			t := hours[k]
			if t == nil {
				t = &trafficHour{Hour: h, Channel: channel}
				hours[k] = t
			}
			t.Tokens += m.Tokens
			if m.Role == string(chat.RoleUser) || m.Role == string(chat.RoleAssistant) {
				t.Messages++
			}
			if m.Role == string(chat.RoleUser) && m.UserKey != "" {
				p := people[m.UserKey]
				if p == nil {
					p = &webPerson{UserKey: m.UserKey}
					people[m.UserKey] = p
				}
				p.Messages++
				p.LastSeen = m.CreatedAt.UTC()
			}
		}
		for _, t := range hours {
			if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "hour"}, {Name: "channel"}},
				DoUpdates: clause.Assignments(map[string]any{
					"messages": gorm.Expr("traffic_hours.messages + ?", t.Messages),
					"tokens":   gorm.Expr("traffic_hours.tokens + ?", t.Tokens)})}).Create(t).Error; err != nil {
				return err
			}
		}
		for _, p := range people {
			if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "user_key"}},
				DoUpdates: clause.Assignments(map[string]any{
					"messages":  gorm.Expr("web_people.messages + ?", p.Messages),
					"last_seen": p.LastSeen})}).Create(p).Error; err != nil {
				return err
			}
		}
		return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}}, DoUpdates: clause.AssignmentColumns([]string{"value", "updated_at"})}).
			Create(&state{Key: trafficMark, Value: fmt.Sprint(msgs[len(msgs)-1].ID), UpdatedAt: d.now()}).Error
	})
	return more, kind(err)
}

// Quarantined are the events set aside as failed, newest first.
func (d *DB) Quarantined(ctx context.Context, limit int) ([]ui.Event, error) {
	var rows []inboxItem
	if err := d.db.WithContext(ctx).Where("state = ?", string(bridge.StateFailed)).Order("updated_at DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]ui.Event, len(rows))
	for i, r := range rows {
		out[i] = ui.Event{Seq: r.Seq, Channel: r.Channel, EventID: r.EventID, ChatKey: r.ChatKey, UserKey: r.UserKey,
			Text: r.Text, Starts: r.Starts, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}

// RetryEvent puts a failed event back in line, its starts forgotten: its
// channel's next sweep runs it again.
func (d *DB) RetryEvent(ctx context.Context, seq int64) (bool, error) {
	res := d.db.WithContext(ctx).Model(&inboxItem{}).Where("seq = ? AND state = ?", seq, string(bridge.StateFailed)).
		Updates(map[string]any{"state": string(bridge.StatePending), "starts": 0, "alone_starts": 0, "updated_at": d.now()})
	return res.RowsAffected == 1, kind(res.Error)
}

// DropEvent marks a failed event done: it is never run.
func (d *DB) DropEvent(ctx context.Context, seq int64) (bool, error) {
	res := d.db.WithContext(ctx).Model(&inboxItem{}).Where("seq = ? AND state = ?", seq, string(bridge.StateFailed)).
		Updates(map[string]any{"state": string(bridge.StateDone), "updated_at": d.now()})
	return res.RowsAffected == 1, kind(res.Error)
}

// Tasks are the scheduled tasks by id, userKey "" everyone's.
func (d *DB) Tasks(ctx context.Context, userKey string, limit int) ([]schedule.Task, error) {
	var rows []taskRow
	q := d.db.WithContext(ctx)
	if userKey != "" {
		q = q.Where("user_key = ?", userKey)
	}
	if err := q.Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]schedule.Task, len(rows))
	for i, r := range rows {
		out[i] = r.task()
	}
	return out, nil
}

// Task is one task by id.
func (d *DB) Task(ctx context.Context, id int64) (schedule.Task, error) {
	var r taskRow
	if err := d.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return schedule.Task{}, kind(err)
	}
	return r.task(), nil
}

// People are who wrote to loadout, the most recent first, as counted by
// Traffic.
func (d *DB) People(ctx context.Context, limit int) ([]ui.Person, error) {
	if _, err := d.Traffic(ctx, d.now()); err != nil {
		return nil, err
	}
	var rows []webPerson
	if err := d.db.WithContext(ctx).Order("last_seen DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]ui.Person, len(rows))
	for i, r := range rows {
		out[i] = ui.Person{UserKey: r.UserKey, Messages: r.Messages, LastSeen: r.LastSeen}
	}
	return out, nil
}
