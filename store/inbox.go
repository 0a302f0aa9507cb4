package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"loadout/bridge"
	"loadout/chat"
)

var _ bridge.Inbox = (*DB)(nil)

// inboxItem is one accepted platform event, kept from before it is
// acknowledged until its answer is sent, and for a while after so a
// redelivery is still recognised. (channel, event_id) is unique; the
// partial index idx_inbox_open answers "what is unfinished" without
// reading finished rows.
type inboxItem struct {
	Seq     int64  `gorm:"primaryKey"`
	Channel string `gorm:"not null;uniqueIndex:idx_inbox_event,priority:1"`
	EventID string `gorm:"not null;uniqueIndex:idx_inbox_event,priority:2"`
	ChatKey string `gorm:"not null"`
	UserKey string
	Text    string
	Route   []byte
	// Parts is the answer as a JSON array of strings, once known.
	Parts string
	Sent  int
	// Starts counts the item's turns that started and never came back
	// (see bridge.Inbox.Begin), AloneStarts those of them that ran with
	// nothing else in flight in their process.
	Starts      int    `gorm:"not null;default:0"`
	AloneStarts int    `gorm:"not null;default:0"`
	State       string `gorm:"not null"`
	// Draft is the channel's reference to the answer shown while written.
	Draft []byte
	// Images are the workspace names of pictures sent with the event, a
	// JSON array.
	Images string
	// Voice is the event's voice note (bridge.VoiceNote) as JSON, with
	// its transcript once made; Speech the answer's text read aloud.
	Voice  string
	Speech string
	// Ask is the approvals the answer's parts ask for
	// (bridge.EncodeAsks).
	Ask string
	// Unattended marks a scheduled task's run (bridge.Pending).
	Unattended bool `gorm:"not null;default:false"`
	// Tainted marks an event whose text carries outside content (a
	// trigger's request body), and Groups the groups its turn starts
	// with, a JSON array (chat.Inbound).
	Tainted   bool   `gorm:"not null;default:false"`
	Groups    string `gorm:"not null;default:''"`
	CreatedAt time.Time
	UpdatedAt time.Time `gorm:"index"`
}

// migrateInbox creates the inbox's partial index, moves the unfinished
// entries of the former Telegram-only inbox into it, and drops what the
// inbox made unnecessary.
func migrateInbox(g *gorm.DB) error {
	if err := g.Exec(`CREATE INDEX IF NOT EXISTS idx_inbox_open ON inbox_items(channel, seq) WHERE state IN ('pending', 'answered')`).Error; err != nil {
		return err
	}
	if g.Migrator().HasTable("telegram_inboxes") {
		err := g.Transaction(func(tx *gorm.DB) error {
			// The old route JSON is what the Telegram channel still writes;
			// a stored reply becomes one part, sent by the channel as is.
			if err := tx.Exec(`INSERT OR IGNORE INTO inbox_items (channel, event_id, chat_key, user_key, text, route, parts, sent, state, created_at, updated_at)
				SELECT 'telegram', 'update:' || update_id, chat_key, user_key, text, CAST(route AS BLOB),
					CASE WHEN reply <> '' THEN json_array(reply) ELSE '' END, 0,
					CASE WHEN reply <> '' THEN 'answered' ELSE 'pending' END, created_at, updated_at
				FROM telegram_inboxes WHERE state <> 'done' ORDER BY update_id`).Error; err != nil {
				return err
			}
			return tx.Exec(`DROP TABLE telegram_inboxes`).Error
		})
		if err != nil {
			return fmt.Errorf("move the Telegram inbox: %w", err)
		}
	}
	// An earlier version marked a task's run by its event id's "task:"
	// prefix; the inbox keeps the mark now.
	if err := g.Exec(unattendedTasks).Error; err != nil {
		return err
	}
	// An earlier version looked messages up by external id; the inbox
	// recognises redeliveries now, and the lookup's index only slowed
	// writes. Its Slack dedupe kept event ids as states.
	if err := g.Exec(`DROP INDEX IF EXISTS idx_messages_external`).Error; err != nil {
		return err
	}
	return g.Exec(`DELETE FROM states WHERE key LIKE 'seen:%'`).Error
}

// unattendedTasks marks the unfinished task runs an earlier version
// stored with only their event id to say so.
const unattendedTasks = `UPDATE inbox_items SET unattended = true WHERE event_id LIKE 'task:%' AND state IN ('pending', 'answered')`

// Accept stores p as pending, or answered with parts. It reports false
// and returns the stored item when the channel already has p.ID.
func (d *DB) Accept(ctx context.Context, channel string, p bridge.Pending, parts []string) (bridge.Item, bool, error) {
	now := d.now()
	row := inboxItem{
		Channel: channel, EventID: p.ID, ChatKey: p.Inbound.ChatKey, UserKey: p.Inbound.UserKey,
		Text: p.Inbound.Text, Route: p.Route, State: string(bridge.StatePending), CreatedAt: now, UpdatedAt: now,
		Unattended: p.Unattended,
	}
	if len(p.Inbound.Images) > 0 {
		b, _ := json.Marshal(p.Inbound.Images) // strings always encode
		row.Images = string(b)
	}
	if len(p.Inbound.Groups) > 0 {
		b, _ := json.Marshal(p.Inbound.Groups) // strings always encode
		row.Groups = string(b)
	}
	row.Tainted = p.Inbound.Tainted
	if p.Voice != nil {
		b, _ := json.Marshal(p.Voice) // strings, an int and a bool always encode
		row.Voice = string(b)
	}
	if parts != nil {
		b, err := json.Marshal(parts)
		if err != nil {
			return bridge.Item{}, false, err
		}
		row.Parts, row.Text, row.State = string(b), "", string(bridge.StateAnswered)
	}
	// Plain SQL: this runs for every event.
	err := d.hotRow(ctx, nil, `INSERT INTO inbox_items (channel, event_id, chat_key, user_key, text, route,
			parts, sent, state, draft, images, voice, speech, ask, unattended, tainted, groups, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, NULL, ?, ?, '', '', ?, ?, ?, ?, ?) ON CONFLICT (channel, event_id) DO NOTHING RETURNING seq`,
		row.Channel, row.EventID, row.ChatKey, row.UserKey, row.Text, row.Route, row.Parts, row.State, row.Images, row.Voice,
		row.Unattended, row.Tainted, row.Groups, row.CreatedAt, row.UpdatedAt).Scan(&row.Seq)
	if err == nil {
		return row.item(), true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return bridge.Item{}, false, kind(err)
	}
	var old inboxItem
	if err := d.db.WithContext(ctx).Where("channel = ? AND event_id = ?", channel, p.ID).Take(&old).Error; err != nil {
		return bridge.Item{}, false, kind(err)
	}
	return old.item(), false, nil
}

func (r inboxItem) item() bridge.Item {
	it := bridge.Item{
		Seq: r.Seq, Channel: r.Channel, State: bridge.State(r.State), Sent: r.Sent, Draft: r.Draft,
		Starts: bridge.Starts{All: r.Starts, Alone: r.AloneStarts},
		Answer: bridge.Answer{Speech: r.Speech},
		Pending: bridge.Pending{ID: r.EventID, Route: r.Route, Unattended: r.Unattended,
			Inbound: chatInbound(r.ChatKey, r.UserKey, r.Text)},
	}
	if r.Parts != "" {
		// A row this package wrote; an unreadable one sends nothing.
		_ = json.Unmarshal([]byte(r.Parts), &it.Parts)
	}
	it.Asks = bridge.DecodeAsks(r.Ask, len(it.Parts))
	if r.Images != "" {
		_ = json.Unmarshal([]byte(r.Images), &it.Inbound.Images)
	}
	if r.Groups != "" {
		_ = json.Unmarshal([]byte(r.Groups), &it.Inbound.Groups)
	}
	it.Inbound.Tainted = r.Tainted
	if r.Voice != "" {
		var v bridge.VoiceNote
		if json.Unmarshal([]byte(r.Voice), &v) == nil {
			it.Voice = &v
		}
	}
	return it
}

// OldestUnfinished returns the chat's oldest pending or answered item of
// the channel, whichever process took it; false when there is none.
func (d *DB) OldestUnfinished(ctx context.Context, channel, chatKey string) (bridge.Item, bool, error) {
	var rows []inboxItem
	err := d.db.WithContext(ctx).Where("channel = ? AND chat_key = ? AND state IN ?", channel, chatKey,
		[]string{string(bridge.StatePending), string(bridge.StateAnswered)}).Order("seq").Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return bridge.Item{}, false, kind(err)
	}
	return rows[0].item(), true, nil
}

// Seen reports whether the channel holds an item with id.
func (d *DB) Seen(ctx context.Context, channel, id string) (bool, error) {
	var n int64
	err := d.db.WithContext(ctx).Model(&inboxItem{}).Where("channel = ? AND event_id = ?", channel, id).Limit(1).Count(&n).Error
	return n > 0, kind(err)
}

// Unfinished returns the channel's pending and answered items by arrival.
func (d *DB) Unfinished(ctx context.Context, channel string) ([]bridge.Item, error) {
	var rows []inboxItem
	err := d.db.WithContext(ctx).Where("channel = ? AND state IN ?", channel,
		[]string{string(bridge.StatePending), string(bridge.StateAnswered)}).Order("seq").Find(&rows).Error
	if err != nil {
		return nil, kind(err)
	}
	out := make([]bridge.Item, len(rows))
	for i, r := range rows {
		out[i] = r.item()
	}
	return out, nil
}

// Answer stores an item's answer: its parts, the approval the last asks
// for, and the text read aloud.
func (d *DB) Answer(ctx context.Context, seq int64, a bridge.Answer) error {
	b, err := json.Marshal(a.Parts)
	if err != nil {
		return err
	}
	return d.updateItem(ctx, seq, "parts = ?, ask = ?, speech = ?, sent = 0, state = ?", string(b), bridge.EncodeAsks(a.Asks), a.Speech, string(bridge.StateAnswered))
}

// Transcribed stores what is known of an item's voice note.
func (d *DB) Transcribed(ctx context.Context, seq int64, note bridge.VoiceNote) error {
	b, err := json.Marshal(note)
	if err != nil {
		return err
	}
	return d.updateItem(ctx, seq, "voice = ?", string(b))
}

// MarkSent records that n parts of an item were sent. The count only
// grows: what a process that died records after another took its chat
// over (its journal, applied at its next start) never takes back what
// the other sent since.
func (d *DB) MarkSent(ctx context.Context, seq int64, n int) error {
	return d.updateItem(ctx, seq, "sent = CASE WHEN sent < ? THEN ? ELSE sent END", n, n)
}

// Drafted records the reference of the draft shown for an item.
func (d *DB) Drafted(ctx context.Context, seq int64, draft []byte) error {
	return d.updateItem(ctx, seq, "draft = ?", draft)
}

// Begin records that an item's turn starts (alone or not) and returns
// how many have started without coming back.
func (d *DB) Begin(ctx context.Context, seq int64, alone bool) (bridge.Starts, error) {
	var s bridge.Starts
	err := d.hotRow(ctx, nil, "UPDATE inbox_items SET starts = starts + 1, alone_starts = alone_starts + ?, updated_at = ? WHERE seq = ? RETURNING starts, alone_starts",
		b2i(alone), d.now(), seq).Scan(&s.All, &s.Alone)
	if errors.Is(err, sql.ErrNoRows) {
		return bridge.Starts{}, fmt.Errorf("store: inbox item %d: %w", seq, chat.ErrNotFound)
	}
	if err != nil {
		return bridge.Starts{}, kind(err)
	}
	return s, nil
}

// Returned takes back one start of an item's turn (alone or not).
func (d *DB) Returned(ctx context.Context, seq int64, alone bool) error {
	return d.updateItem(ctx, seq, "starts = CASE WHEN starts > 0 THEN starts - 1 ELSE 0 END, alone_starts = CASE WHEN alone_starts >= ? THEN alone_starts - ? ELSE 0 END",
		b2i(alone), b2i(alone))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Finish marks an item done or failed.
func (d *DB) Finish(ctx context.Context, seq int64, state bridge.State) error {
	if state != bridge.StateDone && state != bridge.StateFailed {
		return fmt.Errorf("store: finish item %d: %q is not a final state", seq, state)
	}
	return d.updateItem(ctx, seq, "state = ?", string(state))
}

// updateItem sets columns of an item (set is the SET list of a plain
// UPDATE, args its values) and its updated_at.
func (d *DB) updateItem(ctx context.Context, seq int64, set string, args ...any) error {
	n, err := d.hotExec(ctx, nil, "UPDATE inbox_items SET "+set+", updated_at = ? WHERE seq = ?", append(args, d.now(), seq)...)
	if err != nil {
		return kind(err)
	}
	if n == 0 {
		return fmt.Errorf("store: inbox item %d: %w", seq, errNotFound)
	}
	return nil
}

// Prune deletes finished items last changed before t, and the
// questions that expired before it.
func (d *DB) Prune(ctx context.Context, before time.Time) (int64, error) {
	if err := d.pruneQuestions(ctx, before); err != nil {
		return 0, err
	}
	res := d.db.WithContext(ctx).Where("state IN ? AND updated_at < ?",
		[]string{string(bridge.StateDone), string(bridge.StateFailed)}, before).Delete(&inboxItem{})
	return res.RowsAffected, kind(res.Error)
}

func chatInbound(chatKey, userKey, text string) chat.Inbound {
	return chat.Inbound{ChatKey: chatKey, UserKey: userKey, Text: text}
}

// InboxStats reports, per channel, how many events are unfinished and
// when the oldest of them arrived. The partial index idx_inbox_open
// answers it without reading finished rows.
func (d *DB) InboxStats(ctx context.Context) ([]bridge.InboxStat, error) {
	var groups []struct {
		Channel string
		Open    int
		First   int64
	}
	err := d.db.WithContext(ctx).Model(&inboxItem{}).Select("channel, COUNT(*) AS open, MIN(seq) AS first").
		Where("state IN ?", []string{string(bridge.StatePending), string(bridge.StateAnswered)}).
		Group("channel").Order("channel").Scan(&groups).Error
	if err != nil {
		return nil, kind(err)
	}
	out := make([]bridge.InboxStat, len(groups))
	for i, g := range groups {
		var first inboxItem
		if err := d.db.WithContext(ctx).Select("created_at").Where("seq = ?", g.First).Take(&first).Error; err != nil {
			return nil, kind(err)
		}
		out[i] = bridge.InboxStat{Channel: g.Channel, Open: g.Open, Oldest: first.CreatedAt}
	}
	return out, nil
}
