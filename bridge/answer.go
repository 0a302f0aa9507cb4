package bridge

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// How a pipeline takes the answer to a question a turn waits on, in this
// process or another. Only a turn can ask, so the store is asked only
// when a question may wait: when a turn of this process waits on one
// as the message arrives, or an event of the chat is to be resumed here
// (its turn, cut short, may have left one), or another process holds
// the chat's claim (the message would wait for it: it is checked
// then), or a turn of a process that ended is to be resumed before the
// message. A message that comes otherwise, in a quiet chat or while a
// turn runs that asks nothing, costs nothing more.

// mayAsk reports whether a question of this process's may wait in
// chatKey: one a turn here waits on, or one a turn cut short left
// behind, whose event is queued here or runs here resumed. p.mu must be
// held.
func (p *Pipeline) mayAsk(chatKey string) bool {
	return p.askingIn[chatKey] > 0 || p.resumes[chatKey] > 0
}

// answers reports whether event it, just taken in, answers the question
// that waits in its chat; if so it records the answer for the turn and
// finishes the event in one step (so no process runs it as a message).
// The question's person answers with a message, a press's
// "/answer <code> <n>", or /cancel. A /clear by anyone cancels the
// question and is not taken: it is then handled as usual. holding says
// this process holds the chat's claim, so no other runs a turn there.
//
// When the turn that asked no longer runs — its process ended — the
// answer is kept for the run that resumes the turn (see
// Questions.TakeAnswered), the person is told so, and the turn is
// resumed; a question whose event is finished is stale, and the message
// is then one like any other.
func (p *Pipeline) answers(ctx context.Context, out Outlet, it Item, holding bool) bool {
	qs := p.questions
	if qs == nil || it.Reply != "" {
		return false
	}
	log := p.log.With("channel", p.cfg.Channel, "event", it.ID, "chat", it.Inbound.ChatKey)
	q, ok, err := qs.WaitingQuestion(ctx, p.cfg.Channel, it.Inbound.ChatKey)
	if err != nil {
		log.Warn("delivery: cannot tell whether a message answers a question; it is taken as a message", "err", err)
		return false
	}
	if !ok {
		return false
	}
	answer, state, taken := reading(q, it.Inbound.UserKey, it.Inbound.Text)
	if state == "" {
		return false
	}
	p.mu.Lock()
	wake := p.asking[q.Turn]
	p.mu.Unlock()
	gone := wake == nil && (p.cfg.Claim == nil || holding || time.Since(q.Beat) > p.stale())
	var resume *Item
	if gone {
		// Rare (a process ended mid-question): the channel's unfinished
		// events are read, by the index of unfinished ones.
		items, err := p.cfg.Inbox.Unfinished(ctx, p.cfg.Channel)
		if err != nil {
			log.Warn("delivery: cannot tell whether a question's turn is still to be resumed; the message is taken as a message", "err", err)
			return false
		}
		for i := range items {
			if items[i].ID == q.Event && items[i].Inbound.ChatKey == q.ChatKey {
				resume = &items[i]
			}
		}
		if resume == nil {
			// Its turn is over: nothing will read an answer.
			if err := qs.EndQuestion(ctx, q.ID); err != nil {
				log.Warn("delivery: cannot end a question left behind", "err", err)
			}
			return false
		}
	}
	var seq int64
	if taken {
		seq = it.Seq
	}
	switch ok, err := qs.SettleQuestion(ctx, q.ID, state, answer, seq); {
	case err != nil:
		log.Warn("delivery: cannot record a question's answer; it is taken as a message", "err", err)
		return false
	case !ok:
		return false // answered or ended meanwhile: the next message
	}
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	} else if p.signals != nil {
		if err := p.signals.Signal(ctx, TopicQuestion, strconv.FormatInt(q.ID, 10)); err != nil {
			log.Warn("delivery: cannot signal a question's answer; its turn reads it in a moment", "err", err)
		}
	}
	if !taken {
		return false
	}
	if !gone {
		return true
	}
	log.Info("delivery: an answer came after the turn that asked was cut short; the turn is resumed with it")
	if route, err := out.ReadRoute(it.Route); err == nil && len(it.Route) > 0 {
		p.tell(ctx, out, route, nil, textAnsweredAfterRestart, log)
	}
	if p.cfg.Claim != nil && !holding {
		// Run once the ended process's claim on the chat runs out.
		p.mu.Lock()
		if !p.stopped {
			p.enqueue(job{it: *resume, resume: true})
		}
		p.mu.Unlock()
	}
	return true
}

// stale is how long a question's asker may show no sign of life before
// it is taken to have ended.
func (p *Pipeline) stale() time.Duration { return 10 * p.cfg.QuestionPoll }

// reading is what a message of user says to question q: the answer to
// record and the state it moves the question to ("" when it says
// nothing to it), and whether the message is taken (not handled as a
// message of its own). A /clear by anyone cancels the question and is
// not taken; from anyone but the person asked, nothing else counts; a
// command other than /answer with the question's code or /cancel is a
// command.
func reading(q AskedQuestion, user, text string) (answer string, state QuestionState, taken bool) {
	name, args, command := ParseCommand(text)
	switch {
	case command && name == "clear":
		return "", QuestionCancelled, false
	case user != q.UserKey:
		return "", "", false
	case command && name == "cancel":
		return "/cancel", QuestionAnswered, true
	case command && name == "answer":
		code, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
		if !sameCode(code, q.Code) {
			return "", "", false
		}
		return strings.TrimSpace(rest), QuestionAnswered, true
	case command:
		return "", "", false
	}
	return strings.TrimSpace(text), QuestionAnswered, true
}

// Asks reports whether the question code ("#k7f2" or "k7f2") waits in
// chatKey for userKey's answer: a channel checks a press of a choice
// with it before taking it, as it checks an approval's. When the store
// cannot tell, it reports true: the pipeline checks the press again
// when it takes it.
func (p *Pipeline) Asks(ctx context.Context, chatKey, userKey, code string) bool {
	if p.questions == nil {
		return false
	}
	q, ok, err := p.questions.WaitingQuestion(ctx, p.cfg.Channel, chatKey)
	if err != nil {
		p.log.Warn("delivery: cannot read the chat's question to check a press", "chat", chatKey, "err", err)
		return true
	}
	return ok && q.UserKey == userKey && sameCode(code, q.Code)
}
