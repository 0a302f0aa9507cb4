// Package chat is the engine: it keeps one open session per chat, persists
// every message, rebuilds the session's tool catalog from the store on each
// message, assembles the prompt and runs the model/tool loop.
package chat

import (
	"context"
	"errors"
	"time"

	"loadout/tools"
)

// Role is who wrote a message.
type Role string

// Message roles, as the OpenAI chat API names them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one entry of a session's history.
type Message struct {
	ID   int64
	Role Role
	// Text is the message text; for a tool message, the result content.
	Text string
	// ToolCalls are the calls of an assistant message.
	ToolCalls []ToolCall
	// ToolCallID, ToolName, Status, Code and Arguments describe a tool
	// result (Role == RoleTool); Code is the result's error code.
	ToolCallID string
	ToolName   string
	Status     string
	Code       string
	Arguments  string
	// Groups are, on a successful result of a call that changed the
	// session's loaded groups (load_tool_group, find_tools with load,
	// unload_tool_group), its changes, with the unloads the catalog
	// budget made after it (tools.ApplyGroupChanges replays them).
	Groups []tools.GroupChange
	// Ask is, on the assistant message that asks the person to approve a
	// held call, the approval's id: a turn resumed after a crash finds
	// the question it already asked by it.
	Ask string
	// UserKey is the person who wrote a user message; on a tool result,
	// the person it belongs to when it is personal (tools.Result.Personal):
	// on anyone else's turn the model sees a placeholder instead.
	UserKey string
	// ExternalID is the channel's id of a user message, when it has one.
	ExternalID string
	// Tokens is the message's token count as sent to the model.
	Tokens int
	// Images go with a user message to a model that reads images; they
	// are sent with the turn's own message only, not kept in history.
	Images []Image `json:"-"`
}

// Image is a picture given to the model.
type Image struct {
	MIME string
	Data []byte
}

// Usage counts the tokens of one or more model calls.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens are the prompt tokens the provider served from its
	// prompt cache, where it reports them (part of PromptTokens).
	CachedTokens int
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.PromptTokens + v.PromptTokens, u.CompletionTokens + v.CompletionTokens, u.CachedTokens + v.CachedTokens}
}

// Request is one model call.
type Request struct {
	Model    string
	Messages []Message // the first is the system prompt
	Tools    []tools.Definition
	// OnText, when set, asks the model to stream: it is called with the
	// text of the answer so far, from the model's goroutine, as it
	// grows. A retried call, or one another provider answers after the
	// first failed, starts again from "": what was streamed before is
	// not part of the answer.
	OnText func(text string)
	// MaxTokens, when above zero, bounds the answer below the
	// provider's configured bound (a server's sampling maxTokens).
	MaxTokens int
}

// Response is the model's answer: text, tool calls, or both.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// Model is the model that answered when it is not the request's (a
	// fallback service asked for its own); "" otherwise.
	Model string
}

// Model is an OpenAI-compatible chat model. Complete retries transient
// faults itself; an error means the call failed for good. It must not
// keep req (or its slices) after it returns: the engine reuses them.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Session is one conversation of a chat, from open until /clear.
type Session struct {
	ID       int64
	ChatKey  string
	OpenedAt time.Time
	// Messages is the number of messages persisted in the session.
	Messages int
	// Usage is the sum of the session's model calls.
	Usage Usage
}

// Store persists sessions, messages and per-chat settings. Implementations
// must be safe for concurrent use.
type Store interface {
	// OpenSession returns the chat's open session, opening one if none is.
	OpenSession(ctx context.Context, chatKey string) (Session, error)
	// CloseSession closes the chat's open session, if any, and reports
	// whether one was open.
	CloseSession(ctx context.Context, chatKey string) (bool, error)
	// Append persists msgs in one transaction and adds usage to the
	// session; audit, the decisions rules made on the round's calls, go
	// to the audit trail in the same transaction.
	Append(ctx context.Context, sessionID int64, msgs []Message, usage Usage, audit ...AuditEntry) error
	// Recent returns up to limit of the session's latest messages, oldest first.
	Recent(ctx context.Context, sessionID int64, limit int) ([]Message, error)
	// LoadedGroups returns the groups loaded by successful load_tool_group
	// calls in the session, without scanning its history.
	LoadedGroups(ctx context.Context, sessionID int64) ([]string, error)
	// ChatSettings returns the chat's settings, keyed by the
	// tools.Setting constants.
	ChatSettings(ctx context.Context, chatKey string) (map[string]string, error)

	// Hold is Append for a round with calls held for approval: the
	// round and its approvals are stored in one transaction.
	Hold(ctx context.Context, sessionID int64, msgs []Message, usage Usage, asks []Approval, audit ...AuditEntry) error
	// Approval returns the chat's approval whose id is ref, or for a
	// shorter ref (an approval's Code) the newest whose id begins with
	// it. ErrNotFound when there is none.
	Approval(ctx context.Context, chatKey, ref string) (Approval, error)
	// Decide moves an approval from status from to status to, recording
	// the event that did it, and reports whether it was still in from.
	Decide(ctx context.Context, id, from, to, event string) (bool, error)
	// Resolve records the result of a held call in place of its pending
	// tool message, and the decision on it in the audit trail, in one
	// transaction.
	Resolve(ctx context.Context, sessionID int64, callID string, m Message, entry AuditEntry) error
	// PendingApprovals returns the chat's approvals still waiting, newest
	// first.
	PendingApprovals(ctx context.Context, chatKey string) ([]Approval, error)
	// Batch returns the approvals asked in one question (Approval.Batch),
	// in the order they were asked.
	Batch(ctx context.Context, chatKey, batch string) ([]Approval, error)

	// Rules returns the person's own rules (tools.Rule.Owner), oldest
	// first.
	Rules(ctx context.Context, userKey string) ([]tools.Rule, error)
	// AddRule keeps a person's rule.
	AddRule(ctx context.Context, r tools.Rule) error
	// RemoveRule removes the person's rule with code, and reports
	// whether there was one.
	RemoveRule(ctx context.Context, userKey, code string) (bool, error)

	// Audit appends decisions to the audit trail. The trail is never
	// changed: an entry for a call already recorded is dropped.
	Audit(ctx context.Context, entries ...AuditEntry) error
	// AuditLog returns the chat's newest decisions, newest first: all of
	// them when userKey is "", else those on that person's calls.
	AuditLog(ctx context.Context, chatKey, userKey string, limit int) ([]AuditEntry, error)
}

// Approval statuses.
const (
	ApprovalPending   = "pending"   // asked, not answered
	ApprovalRunning   = "running"   // approved; the call is running
	ApprovalDone      = "done"      // approved and run
	ApprovalDenied    = "denied"    // the person said no
	ApprovalExpired   = "expired"   // nobody answered in time
	ApprovalCancelled = "cancelled" // the conversation was cleared
)

// Approval is a tool call held until the person who asked approves it.
type Approval struct {
	ID        string
	ChatKey   string
	SessionID int64
	// UserKey is the only person who may answer.
	UserKey string
	CallID  string
	Tool    string
	// Arguments are the call's, as checked and decoded, encoded again
	// (tools.Input.JSON): what runs, and what Summary was built from.
	Arguments string
	Summary   string
	// Tainted: the turn that asked had read untrusted content, and the
	// turn the answer carries on inherits it.
	Tainted bool
	Status  string
	// DecidedBy is the event that answered it.
	DecidedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	// Batch is the id of the first approval asked in the same question:
	// the calls of one answer are asked together and decided one by
	// one, and the turn carries on once all are.
	Batch string
	// Offer is the scope an "Always allow" of this call would take, nil
	// when none is offered (tools.Offer).
	Offer *tools.Scope
	// Reach is what the call reaches, as its tool declares it
	// (tools.ReachOf, in the form of tools.Reach.String).
	Reach string
	// Unknown says what the call may reach that could not be accounted
	// for (tools.Reach.Unknown), which the question shows.
	Unknown []string
	// Delegate is, for a sub-agent's call, the sub-agent (its Delegation
	// as JSON): the approval is asked in the person's chat, and its
	// answer carries the sub-agent's turn on. "" for the chat's own turn.
	Delegate string
}

// Decisions of the audit trail.
const (
	AuditApproved      = "approved"
	AuditDenied        = "denied"
	AuditExpired       = "expired"
	AuditCancelled     = "cancelled"
	AuditAllowedByRule = "allowed_by_rule"
	AuditDeniedByRule  = "denied_by_rule"
)

// AuditEntry is one decision on a call, as the audit trail keeps it.
type AuditEntry struct {
	At time.Time
	// ChatKey is the chat; UserKey the person whose turn made the call.
	ChatKey string
	UserKey string
	// SessionID and CallID name the call: the trail keeps one decision
	// per call.
	SessionID int64
	CallID    string
	Tool      string
	Summary   string
	// Reach is what the call reaches, as its tool declares it
	// (tools.Reach.String).
	Reach string
	// ArgsHash is the SHA-256 of the call's stored arguments, in hex.
	ArgsHash string
	// Tainted: the turn had read untrusted content.
	Tainted bool
	// Decision is one of the Audit constants; Rule the code of the rule
	// that made it, if one did.
	Decision string
	Rule     string
	// DecidedBy is the person who answered; "" for a rule, an expiry or
	// a cleared conversation.
	DecidedBy string
	// Outcome is "ran", "failed: <code>" or "interrupted" for a call
	// that was let through, "" for one that was not.
	Outcome string
}

// Inbound is one message from a person.
type Inbound struct {
	// ChatKey identifies the conversation, e.g. "telegram:123".
	ChatKey string
	// UserKey identifies the sender, e.g. "telegram:42".
	UserKey string
	Text    string
	// ID optionally identifies the message at its channel, e.g.
	// "telegram:update:123"; it is stored with the message.
	ID string
	// Resume marks a message that may have been handled in part before (a
	// turn cut by a crash or a failure, run again by the delivery
	// pipeline). The engine then looks for the message by ID and carries
	// on after what was recorded instead of recording it twice. Fresh
	// messages skip that lookup: the pipeline's inbox already drops
	// redelivered events.
	Resume bool
	// OnText, when set, streams the turn: it receives the text of the
	// model's current answer so far each time it grows (a new round of the
	// turn starts again from ""). It must return quickly.
	OnText func(text string) `json:"-"`
	// Images are the names, in the chat's workspace, of the pictures the
	// person sent with the message; with Config.Images set the model
	// sees them.
	Images []string
	// Unattended marks a turn nobody waits on (a scheduled task's run):
	// a call that needs approval is held and asked in the chat, like any
	// other, and the run carries on when its owner answers.
	Unattended bool
	// Tainted starts the turn as having read untrusted content: the
	// turn an approval's answer carries on, when the turn that asked
	// had; a trigger's, whose request body is outside text.
	Tainted bool
	// Groups are loaded before the turn's first model call, each by a
	// load_tool_group call recorded in the session as the model's would
	// be (so within the operator's policy, and kept for the session):
	// a trigger's groups, a sub-agent's.
	Groups []string
	// Delegation, when set, makes the turn a sub-agent's (see
	// Engine.Delegate): ChatKey names its own session, and the person's
	// chat is Delegation.Chat.
	Delegation *Delegation
}

// chat is the person's chat: ChatKey, or a sub-agent's Delegation.Chat.
func (in Inbound) chat() string {
	if in.Delegation != nil {
		return in.Delegation.Chat
	}
	return in.ChatKey
}

// Errors a Store wraps its failures in, so callers can tell them apart
// without knowing the database.
var (
	// ErrNotFound: the thing asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTransient: the store is busy or briefly unreachable; the same
	// call may succeed if tried again.
	ErrTransient = errors.New("store temporarily unavailable")
)

// Errors a Model wraps its failures in when retrying cannot help because
// the service is set up wrongly.
var (
	// ErrModelKey: the model service rejected the API key (401, 403).
	ErrModelKey = errors.New("the model service rejected the API key")
	// ErrModelUnknown: the model service does not know the model (404).
	ErrModelUnknown = errors.New("the model service does not know the model")
)

// Reply is the engine's answer to an Inbound.
type Reply struct {
	Text string
	// Ask is the id of the approval the reply asks for (the first, when
	// it asks several); the channel shows Approve and Deny with it, and
	// its Code (see CodeOf).
	Ask string
	// Asks are all the approvals the reply asks for, in order. With one
	// whose Text is "", Text is its question. Otherwise Text opens them
	// and each is a message of its own, with its own buttons.
	Asks []Asked
	// Usage is what the turn's model calls cost.
	Usage Usage
	// Tainted: the turn read untrusted content.
	Tainted bool
}

// Asked is one approval a reply asks for.
type Asked struct {
	ID string
	// Text is its own question, "" when the reply's Text is.
	Text string
	// Always is the scope "Always allow" takes, as the person reads it;
	// "" when it is not offered.
	Always string
}
