package bridge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"loadout/tools"
)

// Questions a running tool asks (tools.Asker). A turn that asks waits in
// its chat's order, so the person's answer cannot queue behind it: the
// question is recorded in the store (Questions), and the pipeline that
// takes the answer — this process's or another's — records it there and
// signals it, and the turn reads it (see answer.go). Nothing of it
// reaches the engine.

// Prompter is an optional Outlet feature of a channel whose input waits
// for the turn (the console reads no line while a message is under way):
// it shows text and returns the next thing the person types.
type Prompter interface {
	Prompt(ctx context.Context, route any, text string) (string, error)
}

// Chooser is an optional Outlet feature: it sends text as a message of
// its own with a button per choice that only user may press; a press is
// the person's message "/answer <code> <n>" (n counts from 1).
type Chooser interface {
	Choose(ctx context.Context, route any, text, code, user string, choices []string) error
}

// DefaultQuestionTTL is how long a question waits when its asker sets no
// expiry.
const DefaultQuestionTTL = 10 * time.Minute

// Sentences of questions.
const (
	textNoQuestion = "There is no question of mine waiting for your answer here."
	// textNothingToCancel answers a /cancel with nothing to stop.
	textNothingToCancel = "Nothing of mine is running or waiting for your answer here."
	// TextNoQuestion refuses a press of a question's choice that cannot
	// count: someone else's, or a question no longer waiting.
	TextNoQuestion  = "This question is not waiting for your answer."
	textQuestionEnd = "Question %s — reply with your answer (only you can answer it; it expires in %s). Send /cancel to stop."
	// textAnsweredAfterRestart answers an answer to a question whose
	// turn was cut short (its process ended) before the answer came.
	textAnsweredAfterRestart = "The request that asked this was cut short by a restart before your answer reached it. I'm running it again, and if it asks the same question, your answer is used."
)

// turnAsker is the tools.Asker of one run of a turn: questions go to the
// chat of the turn, bound to the person whose message started it.
type turnAsker struct {
	p       *Pipeline
	out     Outlet
	route   any
	chatKey string
	user    string
	// event is the inbox id of the turn's event; turn names this run.
	event string
	turn  string
}

// Ask sends q to the turn's chat and waits for the person's answer, the
// question's expiry (ctx's deadline, else DefaultQuestionTTL), a /clear
// or /cancel, or the end of the turn. A run resumed after a restart
// that asks what the run cut short asked gets what the person answered
// that one, without asking again.
func (a *turnAsker) Ask(ctx context.Context, q tools.Question) (string, error) {
	if q.Private {
		if pc, ok := a.out.(interface{ Private(string) bool }); !ok || !pc.Private(a.chatKey) {
			return "", tools.ErrNotPrivate
		}
	}
	ttl := DefaultQuestionTTL
	if dl, ok := ctx.Deadline(); ok {
		ttl = time.Until(dl)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ttl)
		defer cancel()
	}
	text := q.Text
	if pr, ok := a.out.(Prompter); ok {
		if len(q.Choices) > 0 {
			text += "\n" + numbered(q.Choices)
		}
		ans, err := pr.Prompt(ctx, a.route, text)
		return a.result(ctx, strings.TrimSpace(ans), err, q.Choices)
	}
	qs := a.p.questions
	if qs == nil {
		return "", tools.ErrNoAsker
	}
	rec := AskedQuestion{Channel: a.p.cfg.Channel, ChatKey: a.chatKey, UserKey: a.user, Event: a.event, Turn: a.turn,
		Code: newQuestionCode(), Text: q.Text, Choices: q.Choices, Expires: time.Now().Add(ttl)}
	switch ans, ok, err := qs.TakeAnswered(ctx, rec); {
	case err != nil:
		return "", fmt.Errorf("bridge: read the answers of an earlier run: %w", err)
	case ok:
		return a.result(ctx, ans, nil, q.Choices)
	}
	wake, err := a.p.await(a.turn, a.chatKey)
	if err != nil {
		return "", err
	}
	defer a.p.unawait(a.turn, a.chatKey)
	id, err := qs.AskQuestion(ctx, rec)
	if errors.Is(err, ErrAnotherQuestion) {
		return "", fmt.Errorf("bridge: another question waits in %s", a.chatKey)
	}
	if err != nil {
		return "", fmt.Errorf("bridge: record a question: %w", err)
	}
	end := fmt.Sprintf(textQuestionEnd, rec.Code, humanTTL(ttl))
	if ch, ok := a.out.(Chooser); ok && len(q.Choices) > 0 {
		err = ch.Choose(ctx, a.route, text+"\n\n"+end, rec.Code, a.user, q.Choices)
	} else {
		if len(q.Choices) > 0 {
			text += "\n" + numbered(q.Choices)
		}
		for _, part := range a.out.Split(text + "\n\n" + end) {
			if err = a.out.Send(ctx, a.route, part); err != nil {
				break
			}
		}
	}
	if err != nil {
		a.end(ctx, id)
		return "", fmt.Errorf("bridge: send a question: %w", err)
	}
	return a.wait(ctx, id, wake, q.Choices)
}

// wait waits for question id's answer: told by this process (wake), by
// another (a notice), or read every QuestionPoll.
func (a *turnAsker) wait(ctx context.Context, id int64, wake chan struct{}, choices []string) (string, error) {
	qs := a.p.questions
	if s := a.p.signals; s != nil {
		idText := strconv.FormatInt(id, 10)
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		s.Listen(lctx, TopicQuestion, func(payload string) {
			if payload == "" || payload == idText {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
	}
	tick := time.NewTicker(a.p.cfg.QuestionPoll)
	defer tick.Stop()
	for {
		select {
		case <-wake:
		case <-tick.C:
		case <-ctx.Done():
			// No longer waiting: an answer that comes now is the
			// person's next message.
			a.end(ctx, id)
			return a.result(ctx, "", ctx.Err(), nil)
		}
		q, err := qs.PollQuestion(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				a.p.log.Warn("delivery: cannot read a question's answer; trying again", "chat", a.chatKey, "err", err)
			}
			continue
		}
		switch q.State {
		case QuestionTaken:
			return a.result(ctx, q.Answer, nil, choices)
		case QuestionCancelled:
			return "", tools.ErrAskCancelled
		case QuestionEnded:
			return "", tools.ErrNotAnswered
		}
	}
}

// end ends question id in the store, however ctx ended.
func (a *turnAsker) end(ctx context.Context, id int64) {
	a.p.write(ctx, a.p.log, "end a question", func(ctx context.Context) error {
		return a.p.questions.EndQuestion(ctx, id)
	})
}

// result maps an answer to Ask's: a number picks a choice, /cancel
// cancels, the end of the question's time is ErrNotAnswered.
func (a *turnAsker) result(ctx context.Context, ans string, err error, choices []string) (string, error) {
	switch {
	case err == context.DeadlineExceeded:
		return "", tools.ErrNotAnswered
	case err != nil:
		return "", err
	case ans == "/cancel" || ans == "/clear":
		return "", tools.ErrAskCancelled
	}
	if n, err := strconv.Atoi(ans); err == nil && n >= 1 && n <= len(choices) {
		return choices[n-1], nil
	}
	return ans, nil
}

// await registers this process's wait on a question of run turn: the
// process that takes the answer wakes it without a notice, and knows
// that its asker lives. A run waits on one question at a time.
func (p *Pipeline) await(turn, chatKey string) (chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asking[turn] != nil {
		return nil, fmt.Errorf("bridge: another question waits in %s", chatKey)
	}
	wake := make(chan struct{}, 1)
	p.asking[turn] = wake
	p.askingIn[chatKey]++
	return wake, nil
}

func (p *Pipeline) unawait(turn, chatKey string) {
	p.mu.Lock()
	delete(p.asking, turn)
	if p.askingIn[chatKey]--; p.askingIn[chatKey] <= 0 {
		delete(p.askingIn, chatKey)
	}
	p.mu.Unlock()
}

// numbered lists choices one a line, numbered from 1.
func numbered(choices []string) string {
	var b strings.Builder
	for i, c := range choices {
		fmt.Fprintf(&b, "%d. %s\n", i+1, c)
	}
	return strings.TrimRight(b.String(), "\n") + "\n(Reply with a number.)"
}

// newQuestionCode is "#" and four random letters or digits (those people
// do not confuse), as approval codes are spelt.
func newQuestionCode() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	var b [4]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "#" + string(b[:])
}

// sameCode compares question codes, with or without their "#".
func sameCode(a, b string) bool {
	return strings.EqualFold(strings.TrimPrefix(a, "#"), strings.TrimPrefix(b, "#"))
}

func humanTTL(d time.Duration) string {
	if d >= time.Minute {
		n := int(d.Round(time.Minute) / time.Minute)
		if n == 1 {
			return "1 minute"
		}
		return fmt.Sprintf("%d minutes", n)
	}
	return fmt.Sprintf("%d seconds", max(1, int(d.Round(time.Second)/time.Second)))
}
