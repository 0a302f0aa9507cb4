package bridge

import (
	"context"
	"errors"
	"time"
)

// QuestionState is where a question a turn asked is in its life.
type QuestionState string

// Question states.
const (
	// QuestionWaiting: asked; no answer yet.
	QuestionWaiting QuestionState = "waiting"
	// QuestionAnswered: the person's answer is recorded; no run of the
	// turn that asked has taken it yet.
	QuestionAnswered QuestionState = "answered"
	// QuestionTaken: a run of the asking turn took the answer.
	QuestionTaken QuestionState = "taken"
	// QuestionCancelled: the conversation was cleared while it waited.
	QuestionCancelled QuestionState = "cancelled"
	// QuestionEnded: it expired, or its turn ended or was run again,
	// unanswered.
	QuestionEnded QuestionState = "ended"
)

// AskedQuestion is a question a running turn asked its person, as the
// store keeps it, so that whichever process takes the answer can hand it
// to the turn.
type AskedQuestion struct {
	ID      int64
	Channel string
	ChatKey string
	// UserKey is the person asked: nobody else answers.
	UserKey string
	// Event is the inbox id of the event whose turn asks. Turn names one
	// run of that turn: a run cut short by a restart and the run that
	// resumes it differ.
	Event string
	Turn  string
	// Code is what the person's "/answer <code> <n>" names ("#k7f2").
	Code    string
	Text    string
	Choices []string
	// Expires is when the question stops waiting. Beat is the last time
	// its asker showed it still waits: it renews it every QuestionPoll.
	Expires time.Time
	Beat    time.Time
	State   QuestionState
	Answer  string
}

// Questions is the Inbox feature that keeps the questions running turns
// ask (tools.Asker): the question is recorded with its person, chat,
// code, choices and expiry; the process that takes the answer records it
// and signals it (TopicQuestion), and the turn that waits, wherever it
// runs, reads it. Without it a pipeline asks nothing (but through a
// Prompter). Implementations must be safe for concurrent use.
type Questions interface {
	// AskQuestion records q as waiting and returns its id. A chat has
	// at most one waiting question: those that wait for a turn no
	// longer running — another event's, or an earlier run of q's own
	// (another Turn) — are ended first; one of q's own run that still
	// waits makes it ErrAnotherQuestion.
	AskQuestion(ctx context.Context, q AskedQuestion) (int64, error)
	// WaitingQuestion returns the chat's waiting question, unless it
	// has expired; ok false when there is none.
	WaitingQuestion(ctx context.Context, channel, chatKey string) (q AskedQuestion, ok bool, err error)
	// SettleQuestion moves question id from waiting to answered (with
	// answer) or cancelled and, when seq is not 0, finishes inbox item
	// seq (the message that answered) in the same transaction, so that
	// no process runs it as a message of its own. It reports false,
	// changing nothing, when the question no longer waits.
	SettleQuestion(ctx context.Context, id int64, state QuestionState, answer string, seq int64) (bool, error)
	// PollQuestion renews question id's Beat and returns it; an
	// answered question is taken by the call (it comes back
	// QuestionTaken, with its answer).
	PollQuestion(ctx context.Context, id int64) (AskedQuestion, error)
	// EndQuestion ends question id if it still waits.
	EndQuestion(ctx context.Context, id int64) error
	// TakeAnswered takes the answer given to a question like q (the
	// same channel, chat, event, person, text and choices) that an
	// earlier run of q's turn asked and no run has taken: a run resumed
	// after a restart carries on with what the person answered the run
	// that was cut. ok is false when there is none.
	TakeAnswered(ctx context.Context, q AskedQuestion) (answer string, ok bool, err error)
}

// ErrAnotherQuestion: a turn asked a question while another of its own
// still waits (two of its calls asking at once).
var ErrAnotherQuestion = errors.New("bridge: another question of this turn waits")

// DefaultQuestionPoll is how often a turn waiting on a question reads
// it in the store even without a notice: the bound on how long an
// answer can take to reach it when a notice is lost.
const DefaultQuestionPoll = time.Second
