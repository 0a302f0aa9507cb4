package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"loadout/chat"
)

// Pending is one platform event a channel hands to the pipeline: the
// person's message and where its answer goes.
type Pending struct {
	// ID names the event at its platform, unique within the channel
	// ("update:123", "event:Ev06…"). A redelivered event carries the same
	// ID, which is how the inbox recognises it.
	ID string
	// Inbound is the message for the engine. Its ID is set by the
	// pipeline from the channel and ID.
	Inbound chat.Inbound
	// Route is the channel's own reply address (a chat id, a thread, a
	// response URL), encoded once by the channel; the pipeline only
	// stores and returns it.
	Route []byte
	// Reply, when not empty, is sent as the answer without running a turn
	// and without storing Inbound.Text: a refusal, a usage hint, a notice.
	Reply string
	// Voice is the voice note the message is, when it is one; Inbound.Text
	// then holds what came with it (a caption, the note about its audio).
	Voice *VoiceNote
	// Unattended marks an event nobody waits on: a scheduled task's run,
	// which asks no one to approve anything.
	Unattended bool
}

// Answer is an event's answer as the channel sends it.
type Answer struct {
	// Parts are the messages, in order.
	Parts []string
	// Asks are the approvals parts ask for: the channel shows Approve
	// and Deny (and "Always allow" where offered) with each (an Asker),
	// or the commands (AskHint).
	Asks []Question
	// Speech, when set, is the answer's text read aloud: one more part,
	// sent after Parts through the channel's Speaker.
	Speech string
}

// State is where an inbox item is in its life.
type State string

// Inbox item states.
const (
	// StatePending: accepted, no answer stored yet.
	StatePending State = "pending"
	// StateAnswered: the answer's parts are stored; Item.Sent of them
	// went out.
	StateAnswered State = "answered"
	// StateDone: every part was sent, or sending failed for good.
	StateDone State = "done"
	// StateFailed: the event could not be handled (a panic, or failures
	// past the attempt limit); it is not tried again.
	StateFailed State = "failed"
)

// Item is a Pending as the inbox keeps it.
type Item struct {
	// Seq orders items by arrival.
	Seq     int64
	Channel string
	Pending
	State State
	// Answer is set once the item is answered.
	Answer
	// Sent counts the parts already sent (the spoken one included).
	Sent int
	// Draft is the channel's reference to the answer shown while it was
	// written (a Drafter's), if one was posted; the first part replaces
	// it.
	Draft []byte
	// Starts are the item's turns that started and never came back.
	Starts Starts
}

// Starts counts an item's turns that started and never came back: each
// time, the process ended under the turn.
type Starts struct {
	// All counts every such start.
	All int
	// Alone counts those that ran alone, with nothing else in flight in
	// their process: the only deaths the item itself is surely to blame
	// for.
	Alone int
}

// Inbox is the durable state of the delivery pipeline. Implementations
// must be safe for concurrent use and should wrap a failure that may pass
// (a busy database) in chat.ErrTransient.
type Inbox interface {
	// Accept stores p for channel. With parts, the item is stored already
	// answered (p.Reply split for sending) and p.Inbound.Text is not kept.
	// It reports false, changing nothing, when the channel already holds
	// an item with p.ID; the returned item is then the stored one.
	Accept(ctx context.Context, channel string, p Pending, parts []string) (Item, bool, error)
	// Unfinished returns the channel's pending and answered items in
	// arrival order.
	Unfinished(ctx context.Context, channel string) ([]Item, error)
	// Seen reports whether the channel holds an item with id.
	Seen(ctx context.Context, channel, id string) (bool, error)
	// Answer stores an item's answer and marks it answered.
	Answer(ctx context.Context, seq int64, a Answer) error
	// Transcribed stores what is known of an item's voice note (its
	// transcript, whether it was sent back).
	Transcribed(ctx context.Context, seq int64, note VoiceNote) error
	// MarkSent records that the first n parts of an item went out.
	MarkSent(ctx context.Context, seq int64, n int) error
	// Drafted records the reference of the draft shown for an item.
	Drafted(ctx context.Context, seq int64, draft []byte) error
	// Finish moves an item to StateDone or StateFailed.
	Finish(ctx context.Context, seq int64, state State) error
	// Begin records, durably, that an item's turn is starting (alone:
	// with nothing else in flight in its process), and returns the
	// item's turns that have started without coming back, this one
	// included. Returned takes one back: the turn came back (it failed
	// cleanly, or was interrupted by a shutdown).
	Begin(ctx context.Context, seq int64, alone bool) (Starts, error)
	Returned(ctx context.Context, seq int64, alone bool) error
	// Prune deletes done and failed items last changed before t, and
	// reports how many. Until then their IDs still recognise redeliveries.
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// InboxStat is one channel's backlog: events not yet finished and when
// the oldest of them arrived.
type InboxStat struct {
	Channel string
	Open    int
	Oldest  time.Time
}

// Question is an approval a part of an answer asks for.
type Question struct {
	// Part is the index, in Answer.Parts, of the part that asks.
	Part int `json:"part"`
	// ID is the approval's id.
	ID string `json:"id"`
	// Always is the scope "Always allow" takes, as the person reads it;
	// "" when it is not offered.
	Always string `json:"always,omitempty"`
}

// AskFor is the question part i asks, nil for none.
func (a Answer) AskFor(i int) *Question {
	for j := range a.Asks {
		if a.Asks[j].Part == i {
			return &a.Asks[j]
		}
	}
	return nil
}

// EncodeAsks is the form an inbox keeps an answer's questions in: ""
// for none, else JSON.
func EncodeAsks(asks []Question) string {
	if len(asks) == 0 {
		return ""
	}
	b, _ := json.Marshal(asks)
	return string(b)
}

// DecodeAsks reads what EncodeAsks wrote for an answer of parts parts.
// An inbox written before questions were kept this way holds one
// approval id, which the last part asks.
func DecodeAsks(s string, parts int) []Question {
	switch {
	case s == "":
		return nil
	case strings.HasPrefix(s, "["):
		var asks []Question
		if json.Unmarshal([]byte(s), &asks) == nil {
			return asks
		}
		return nil
	}
	return []Question{{Part: parts - 1, ID: s}}
}
