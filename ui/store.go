package ui

import (
	"context"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools/memory"
	"loadout/tools/schedule"
)

// Store is what the console reads and writes of loadout's store
// (store.DB implements it). Every list is bounded by its limit or page,
// and each page is answered in a fixed number of queries, whatever the
// number of chats and messages.
type Store interface {
	// Sessions of the console: a row per signed-in browser, found by the
	// hash of its cookie; deleting it signs the browser out.
	CreateWebSession(ctx context.Context, s Session) error
	WebSession(ctx context.Context, id string) (Session, error)
	DeleteWebSession(ctx context.Context, id string) error
	// DeleteUserWebSessions signs a person out everywhere.
	DeleteUserWebSessions(ctx context.Context, userKey string) (int64, error)
	// CreateWebLink stores a sign-in link by its hash; TakeWebLink deletes
	// it and returns whom it was for, once: a second take is
	// chat.ErrNotFound.
	CreateWebLink(ctx context.Context, id, userKey string, expires time.Time) error
	TakeWebLink(ctx context.Context, id string) (userKey string, expires time.Time, err error)
	// Hit counts event ref under key for window when fewer than max were
	// counted in the last window, and reports whether it did: sign-in
	// attempts per address, counted for every process sharing the store.
	Hit(ctx context.Context, key, ref string, max int, window time.Duration) (bool, error)

	// Chats is a page of the chats with an open session, by chat key
	// after the key given; userKey "" is every chat, else those the
	// person wrote in.
	Chats(ctx context.Context, userKey, after string, limit int) ([]Chat, error)
	// ChatCount is how many chats have an open session.
	ChatCount(ctx context.Context) (int64, error)
	// OpenSessionOf is the chat's open session; chat.ErrNotFound when none.
	OpenSessionOf(ctx context.Context, chatKey string) (Chat, error)
	// InChat reports whether the person wrote in the chat's open session.
	InChat(ctx context.Context, chatKey, userKey string) (bool, error)
	// Recent is the session's last limit messages, oldest first.
	Recent(ctx context.Context, sessionID int64, limit int) ([]chat.Message, error)
	// Approvals are the newest approvals, pending ones first when
	// pending; userKey "" is everyone's.
	Approvals(ctx context.Context, userKey string, pending bool, limit int) ([]chat.Approval, error)
	// AuditLog is the audit trail's newest decisions, newest first:
	// every chat's (chatKey ""), everyone's (userKey "") or one
	// person's calls.
	AuditLog(ctx context.Context, chatKey, userKey string, limit int) ([]chat.AuditEntry, error)
	// ApprovalByID is one approval by its full id.
	ApprovalByID(ctx context.Context, id string) (chat.Approval, error)
	// Traffic is the messages and tokens of each channel in hours since
	// since: the store keeps hourly totals, brought up to date here.
	Traffic(ctx context.Context, since time.Time) ([]TrafficHour, error)
	// Quarantined are the events set aside as failed, newest first.
	Quarantined(ctx context.Context, limit int) ([]Event, error)
	// RetryEvent puts a failed event back in line; DropEvent marks it done.
	// Both report false for an event that is not failed.
	RetryEvent(ctx context.Context, seq int64) (bool, error)
	DropEvent(ctx context.Context, seq int64) (bool, error)
	InboxStats(ctx context.Context) ([]bridge.InboxStat, error)
	// Tasks are the scheduled tasks, userKey "" everyone's, at most limit.
	Tasks(ctx context.Context, userKey string, limit int) ([]schedule.Task, error)
	Task(ctx context.Context, id int64) (schedule.Task, error)
	// People are the people who wrote to loadout, the most recent first.
	People(ctx context.Context, limit int) ([]Person, error)
	RecentMemories(ctx context.Context, userKey string, limit int) ([]memory.Memory, error)
	ForgetMemory(ctx context.Context, userKey string, id int64) (bool, error)
}

// Session is a signed-in browser.
type Session struct {
	// ID is the hash of the cookie's value; the value itself is never
	// stored.
	ID      string
	UserKey string
	Admin   bool
	// CSRF is the token its pages embed in every form.
	CSRF      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Chat is a chat with its open session.
type Chat struct {
	ChatKey          string
	SessionID        int64
	OpenedAt         time.Time
	Messages         int
	PromptTokens     int64
	CompletionTokens int64
	// People are who wrote in the session; Groups the groups loaded.
	People []string
	Groups []string
}

// TrafficHour is a channel's messages and tokens in one hour.
type TrafficHour struct {
	Hour     time.Time
	Channel  string
	Messages int64
	Tokens   int64
}

// Event is an inbox event set aside after failing.
type Event struct {
	Seq       int64
	Channel   string
	EventID   string
	ChatKey   string
	UserKey   string
	Text      string
	Starts    int
	UpdatedAt time.Time
}

// Ref is how the person was told of the event: the reference in
// bridge.TextQuarantined.
func (e Event) Ref() string { return e.Channel + ":" + e.EventID }

// Person is someone who wrote to loadout.
type Person struct {
	UserKey  string
	Messages int64
	LastSeen time.Time
}
