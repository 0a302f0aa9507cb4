package bridge

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"loadout/chat"
)

// The channel contract. A channel is one package (telegram, slack,
// console) that turns a platform's events into Pendings for its Pipeline
// and sends the answers back. What every channel implements is Channel;
// what some can do besides is one of the optional interfaces below, found
// by type assertion. The Hub holds the running channels and reaches any
// chat through its channel by the chat key's prefix.
//
// A new channel writes: a Config and New; Name; Run (connect, call
// Pipeline().Start once it can send, hand each event to
// Pipeline().Receive, return when ctx ends); Split, Send and ReadRoute
// (the bytes the inbox keeps → the channel's own route value, read once
// per event and handed to every other method); Route (chat
// key → reply address) and Private; and whichever optional capabilities
// its platform has. cmd adds it to the Hub in one line.

// Channel is what every channel implements.
type Channel interface {
	// Name is the channel's name, which is also its chat keys' prefix
	// ("telegram" for "telegram:42").
	Name() string
	// Run receives the platform's events until ctx ends; it starts the
	// channel's pipeline once it can send, and stops it before returning.
	Run(ctx context.Context) error
	// Pipeline is the channel's delivery pipeline.
	Pipeline() *Pipeline
	// Route is the reply address of a chat of this channel, as Send and
	// the optional features take it; an error when chatKey is not one.
	Route(chatKey string) ([]byte, error)
	// Private reports whether the chat is one person's (a direct
	// message), not a group's.
	Private(chatKey string) bool
	Outlet
}

// Readier is an optional Channel feature: whether it is connected to its
// platform (/readyz, and whether a notice can be sent now).
type Readier interface {
	Ready() bool
}

// FileSender is an optional Channel feature: it sends f, a workspace
// file opened and checked, named name, to the route. It reads f from its
// start at each try (Seek) and leaves it open; it never opens the file
// again by its name.
type FileSender interface {
	SendFile(ctx context.Context, route any, name string, f *os.File) error
}

// Mounter is an optional Channel feature: it serves HTTP endpoints
// (webhooks, slash commands) on the process's server.
type Mounter interface {
	Mount(mux *http.ServeMux)
}

// Inviter is an optional Channel feature: how a person in a shared chat
// reaches loadout alone to send command there ("connect google"), as a
// sentence: a deep link, or where the private chat is.
type Inviter interface {
	Invite(command string) string
}

// Admitter is an optional Channel feature: whether its allow-list lets
// in, now, the person with userKey, one of its own keys ("telegram:42"),
// judged by the key alone, as it would judge a message of theirs. The
// web side asks it at each request of a person's session and before
// each sign-in link, so taking someone off the list ends what they
// reach from the browser too. false with a nil error: not let in; an
// error: it cannot tell now (the store or the platform failed), which
// ends nothing. A channel whose people are all of another channel's
// (the browser chat) has none.
type Admitter interface {
	Admits(ctx context.Context, userKey string) (bool, error)
}

// Outlet is what the pipeline needs from a channel to deliver answers.
type Outlet interface {
	// Split cuts an answer into the messages the platform sends, in order.
	Split(text string) []string
	// ReadRoute reads a route as the inbox keeps it (what Route or the
	// channel's receiving wrote): the pipeline reads each event's route
	// once and hands what this returns to every other method of the
	// channel, which alone knows its type.
	ReadRoute(raw []byte) (any, error)
	// Send sends one part to route. It retries what the platform lets it
	// retry (rate limits, server errors); an error means the part did not
	// go out.
	Send(ctx context.Context, route any, part string) error
}

// Indicator is an optional Outlet feature: a sign that an answer is on
// its way (Telegram's "typing…", a Slack reaction), shown from the start
// of a turn until its answer is sent. stop may be called more than once.
type Indicator interface {
	Working(ctx context.Context, route any) (stop func())
}

// Asker is an optional Outlet feature: it sends a part of an answer
// that asks the person to approve a call (q) as a message of its own,
// never an edit of text the model wrote, with Approve and Deny buttons
// that only user (the asker's user key) may use, each labelled with the
// approval's code (chat.CodeOf), and, when q.Always is set, an "Always
// allow" button that sends /always; the code is in the text (AskLine).
// Without it the part goes out with AskHint.
type Asker interface {
	Ask(ctx context.Context, route any, part string, q Question, user string) error
}

// TextNotYours answers a press of Approve or Deny by anyone but the
// person asked.
const TextNotYours = "Only the person who asked can answer this."

// AskHint ends a question sent by a channel without buttons: the
// commands that answer it, with its code.
func AskHint(q Question) string {
	code := chat.CodeOf(q.ID)
	if q.Always != "" {
		return fmt.Sprintf("\n\nAnswer /approve %s to go ahead, /always %s to always allow it, or /deny %s to stop.", code, code, code)
	}
	return fmt.Sprintf("\n\nAnswer /approve %s to go ahead or /deny %s to stop.", code, code)
}

// AskLine ends a question sent with buttons: its code, which the buttons
// carry too, so the person can tell it from a question the model wrote.
func AskLine(q Question) string {
	code := chat.CodeOf(q.ID)
	if q.Always != "" {
		return fmt.Sprintf("\n\nRequest %s — the buttons below answer it (or /approve %s, /always %s, /deny %s).", code, code, code, code)
	}
	return fmt.Sprintf("\n\nRequest %s — the buttons below answer it (or /approve %s, /deny %s).", code, code, code)
}

// Drafter is an optional Outlet feature: an answer shown while the model
// writes it. Telegram and Slack post a message and edit it as the text
// grows; the console prints the text as it comes.
type Drafter interface {
	// Draft shows text, the answer so far. draft is nil the first time:
	// Draft then posts a message and returns its reference, which later
	// calls pass back to edit that message. The returned reference is
	// what later calls must use.
	Draft(ctx context.Context, route any, draft []byte, text string) ([]byte, error)
	// Replace turns the draft into part, the first message of the final
	// answer (or a sentence of the pipeline's own), formatted as Send
	// would format it.
	Replace(ctx context.Context, route any, draft []byte, part string) error
}

// Speaker is an optional Outlet feature: it sends OGG/Opus audio to the
// route as a voice message (Telegram) or an audio file (Slack). A reply
// spoken aloud goes out through it as one more part of the answer, after
// the text.
type Speaker interface {
	SendVoice(ctx context.Context, route any, audio []byte) error
}
