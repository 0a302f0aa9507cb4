package bridge

import "context"

// Signals carries short notices among the processes that share a store:
// a question's answer recorded, an event of a browser chat kept. A
// notice only makes a listener look sooner. What it is about is kept in
// the store and read there, because a notice can be lost: while a
// process's connection to the database is down and made again, it hears
// nothing, and its listeners are then told so with an empty payload.
// The store implements it: on PostgreSQL with LISTEN/NOTIFY, on SQLite
// (one process) within the process.
type Signals interface {
	// Signal sends payload, at most MaxSignal bytes and never empty, to
	// the listeners of topic: this process's at once, the other
	// processes' through the store.
	Signal(ctx context.Context, topic, payload string) error
	// Listen calls f with each notice of topic until ctx ends, and
	// returns at once. f is called from one goroutine, one notice at a
	// time, and must return at once (hand any work off). An empty
	// payload means notices may have been lost: read the store again.
	Listen(ctx context.Context, topic string, f func(payload string))
}

// MaxSignal is the longest payload of a notice, in bytes (PostgreSQL's
// NOTIFY takes less than 8000, the channel's name and a mark included).
const MaxSignal = 7000

// Topics of notices.
const (
	// TopicQuestion: a question's answer was recorded, or it was
	// cancelled; the payload is its id.
	TopicQuestion = "question"
	// TopicWebChat: the browser chat kept an event, or showed one that
	// is not kept (a draft, the working sign); the payload is the
	// channel's own.
	TopicWebChat = "webchat"
)
