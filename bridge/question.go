package bridge

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"time"

	"loadout/tools"
)

// Questions a running tool asks (tools.Asker). A turn that asks waits in
// its chat's order, so the person's answer cannot queue behind it: the
// pipeline takes a message that answers a waiting question as it
// arrives, stores it (so a redelivery is dropped), marks it done and
// hands its text to the question. Nothing of it reaches the engine.

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
	// TextNoQuestion refuses a press of a question's choice that cannot
	// count: someone else's, or a question no longer waiting.
	TextNoQuestion  = "This question is not waiting for your answer."
	textQuestionEnd = "Question %s — reply with your answer (only you can answer it; it expires in %s). Send /cancel to stop."
)

// waiting is a question that waits for its person's answer.
type waiting struct {
	user    string
	code    string
	choices []string
	answer  chan string   // holds the one answer
	done    chan struct{} // closed when cancelled
	closed  bool
}

// turnAsker is the tools.Asker of one turn: questions go to the chat of
// the turn, bound to the person whose message started it.
type turnAsker struct {
	p       *Pipeline
	out     Outlet
	route   any
	chatKey string
	user    string
}

// Ask sends q to the turn's chat and waits for the person's answer, the
// question's expiry (ctx's deadline, else DefaultQuestionTTL), a /clear
// or /cancel, or the end of the turn.
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
	w := &waiting{user: a.user, code: newQuestionCode(), choices: q.Choices,
		answer: make(chan string, 1), done: make(chan struct{})}
	a.p.mu.Lock()
	if a.p.asks == nil {
		a.p.asks = map[string]*waiting{}
	}
	if a.p.asks[a.chatKey] != nil {
		a.p.mu.Unlock()
		return "", fmt.Errorf("bridge: another question waits in %s", a.chatKey)
	}
	a.p.asks[a.chatKey] = w
	a.p.mu.Unlock()
	defer func() {
		a.p.mu.Lock()
		if a.p.asks[a.chatKey] == w {
			delete(a.p.asks, a.chatKey)
		}
		a.p.mu.Unlock()
	}()
	end := fmt.Sprintf(textQuestionEnd, w.code, humanTTL(ttl))
	var err error
	if ch, ok := a.out.(Chooser); ok && len(q.Choices) > 0 {
		err = ch.Choose(ctx, a.route, text+"\n\n"+end, w.code, a.user, q.Choices)
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
		return "", fmt.Errorf("bridge: send a question: %w", err)
	}
	select {
	case ans := <-w.answer:
		return a.result(ctx, ans, nil, q.Choices)
	case <-w.done:
		return "", tools.ErrAskCancelled
	case <-ctx.Done():
		return a.result(ctx, "", ctx.Err(), nil)
	}
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

// takeAnswer hands in's text to the question waiting in its chat, when
// it answers it: from the person asked, and not a command other than
// /answer with the question's code or /cancel. A /clear of the chat, by
// anyone, cancels the question and is then handled as usual. It reports
// whether the message was taken. p.mu must be held.
func (p *Pipeline) takeAnswer(chatKey, userKey, text string) bool {
	w := p.asks[chatKey]
	if w == nil {
		return false
	}
	name, args, command := ParseCommand(text)
	switch {
	case command && name == "clear":
		w.cancel()
		return false
	case userKey != w.user:
		return false
	case command && name == "cancel":
		w.cancel()
		return true
	case command && name == "answer":
		code, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
		if !strings.EqualFold(strings.TrimPrefix(code, "#"), strings.TrimPrefix(w.code, "#")) {
			return false
		}
		text = strings.TrimSpace(rest)
	case command:
		return false
	}
	select {
	case w.answer <- strings.TrimSpace(text):
		return true
	default:
		return false // answered already
	}
}

// Asks reports whether the question code ("#k7f2" or "k7f2") waits in
// chatKey for userKey's answer: a channel checks a press of a choice
// with it before taking it, as it checks an approval's.
func (p *Pipeline) Asks(chatKey, userKey, code string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.asks[chatKey]
	return w != nil && w.user == userKey && strings.EqualFold(strings.TrimPrefix(code, "#"), strings.TrimPrefix(w.code, "#"))
}

func (w *waiting) cancel() {
	if !w.closed {
		w.closed = true
		close(w.done)
	}
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
