package tools

import (
	"context"
	"errors"
)

// Question is what a running tool asks the person whose turn called it,
// in the chat of the call: a server's elicitation, say. The turn waits
// for the answer; it is not a model round, and neither the question nor
// the answer reaches the model unless the tool returns them.
type Question struct {
	// Text is what the person reads.
	Text string
	// Choices, when set, are the answers offered as buttons where the
	// channel has them (else listed in Text by the asker); the person
	// may still type an answer.
	Choices []string
	// Private sends the question only where it is the person's alone
	// (a sign-in link): in a group it is refused with ErrNotPrivate.
	Private bool
}

// Asker asks the person whose turn runs a question and waits for the
// answer. Implementations bind the question to that person (nobody else
// answers it), give it a code and an expiry, and end the wait when the
// turn's context ends or the conversation is cleared.
type Asker interface {
	// Ask sends q and returns what the person answered. Errors:
	// ErrNotAnswered when the question expired, ErrAskCancelled when the
	// conversation was cleared or the person cancelled, ErrNotPrivate,
	// ctx.Err() when the turn ended, or a channel's send error.
	Ask(ctx context.Context, q Question) (string, error)
}

// Errors of Asker.Ask.
var (
	ErrNotAnswered  = errors.New("the person did not answer in time")
	ErrAskCancelled = errors.New("the question was cancelled")
	ErrNotPrivate   = errors.New("this chat is not private")
	// ErrNoAsker: nobody can be asked on this turn (a scheduled run, or
	// a call made outside a chat).
	ErrNoAsker = errors.New("nobody can be asked on this turn")
)

type askerKey struct{}

// WithAsker returns ctx carrying a, for the tools called under it.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// AskerFrom returns the Asker in ctx; ok is false when there is none
// (an unattended turn, a test's bare context).
func AskerFrom(ctx context.Context) (Asker, bool) {
	a, ok := ctx.Value(askerKey{}).(Asker)
	return a, ok && a != nil
}
