package bridge

import "time"

// Turn outcomes an Observer is told.
const (
	OutcomeAnswered = "answered" // the turn ran and the event is done
	OutcomeRetrying = "retrying" // the turn failed; the event stays pending
	OutcomeFailed   = "failed"   // given up: too many failures, or a panic
	// OutcomeQuarantined: set aside, its turn having ended the process
	// delivery.max_attempts times.
	OutcomeQuarantined = "quarantined"
	// OutcomeStopped: its person stopped the turn (Ctrl-C in the
	// console).
	OutcomeStopped = "stopped"
)

// Observer is told what a pipeline does, for metrics. Its methods must be
// cheap and safe for concurrent use; a nil Observer is allowed.
type Observer interface {
	// Turn reports one handled event: its outcome and how long the turn
	// took (zero when only sending was left).
	Turn(channel, outcome string, took time.Duration)
	// Sent reports one part handed to the platform, or not (ok false).
	Sent(channel string, ok bool)
	// Retried reports one platform API call that is tried again after a
	// rate limit or a server error.
	Retried(channel string)
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) Turn(string, string, time.Duration) {}
func (NopObserver) Sent(string, bool)                  {}
func (NopObserver) Retried(string)                     {}
