package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"loadout/backoff"
	"loadout/chat"
	"loadout/tools"
)

// errClaimed marks an event whose chat another process is serving.
var errClaimed = errors.New("bridge: another process is answering this chat")

// claimRetry is how soon an event whose chat another process serves is
// tried again.
const claimRetry = 100 * time.Millisecond

// claimed runs j under its chat's claim: it runs the chat's unfinished
// events oldest first — those other processes took in too, which a
// process that died left behind — up to and including j.
//
// A new event whose chat another process serves may answer the question
// a turn there waits on, and so may one that finds a turn of a process
// that ended still to be resumed: it is checked (once) before it waits.
func (p *Pipeline) claimed(ctx context.Context, out Outlet, j *job) error {
	finder := p.cfg.Inbox.(OldestFinder)
	ok, err := p.cfg.Claim(ctx, "chat:"+p.cfg.Channel+":"+j.it.Inbound.ChatKey, func(ctx context.Context) error {
		for {
			it, found, err := finder.OldestUnfinished(ctx, p.cfg.Channel, j.it.Inbound.ChatKey)
			if err != nil {
				return errLeft
			}
			if !found || it.Seq > j.it.Seq {
				return nil // j was answered by another process
			}
			mine := it.Seq == j.it.Seq
			if !mine && j.fresh() {
				j.checked = true
				p.answers(ctx, out, j.it, true)
			}
			// Another process may have begun it: its turn resumes.
			if err := p.run(ctx, out, job{it: it, resume: j.resume || !mine || it.State != StatePending}); err != nil || mine {
				return err
			}
		}
	})
	switch {
	case !ok && err != nil:
		if ctx.Err() == nil { // else the stop cut the claim
			p.log.Error("delivery: cannot claim the chat; trying again later", "chat", j.it.Inbound.ChatKey, "err", err)
		}
		return errLeft
	case !ok && j.fresh():
		j.checked = true
		if p.answers(ctx, out, j.it, false) {
			return nil
		}
		return errClaimed
	case !ok:
		return errClaimed
	}
	return err
}

// errLeft marks an event left unfinished for a later try.
var errLeft = errors.New("bridge: the message is kept and will be tried again")

// run handles one event: the turn (unless answered), then the unsent
// parts. A panic fails the event and tells the person.
func (p *Pipeline) run(ctx context.Context, out Outlet, j job) (err error) {
	it := j.it
	log := p.log.With("channel", p.cfg.Channel, "event", it.ID, "chat", it.Inbound.ChatKey)
	// The route is read once for the whole event.
	var route any
	var rerr error
	if len(it.Route) > 0 {
		route, rerr = out.ReadRoute(it.Route)
	}
	if rerr != nil {
		log.Error("delivery: the event's route cannot be read; it is marked failed", "err", rerr)
		p.write(ctx, log, "mark the event failed", func(ctx context.Context) error {
			return p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed)
		})
		p.cfg.Observer.Turn(p.cfg.Channel, OutcomeFailed, 0)
		return fmt.Errorf("bridge: event %s: unreadable route: %w", it.ID, rerr)
	}
	defer func() {
		if r := recover(); r != nil {
			log.Error("delivery: handling the event panicked; it is marked failed", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			p.write(ctx, log, "mark the event failed", func(ctx context.Context) error {
				return p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed)
			})
			p.tell(ctx, out, route, it.Draft, TextFailed, log)
			p.cfg.Observer.Turn(p.cfg.Channel, OutcomeFailed, 0)
			err = fmt.Errorf("bridge: event %s panicked: %v", it.ID, r)
		}
	}()
	// The sign shows during a turn; an answered event resumed after a
	// restart shows it too, briefly, so a sign an earlier process left
	// behind (a Slack reaction) is taken down when its answer is sent.
	stop := func() {}
	if ind, ok := out.(Indicator); ok && (it.State == StatePending || j.resume) {
		stop = ind.Working(ctx, route)
	}
	defer stop()
	var took time.Duration
	// leave lets the process's other turns go on once this one's is over.
	leave := func() {}
	defer func() { leave() }()
	if it.State == StatePending {
		// A turn that was in flight when its process ended runs alone,
		// so that only an end it alone could cause is held against it.
		alone := it.Starts.All > 0
		var err error
		if leave, err = p.cfg.Gate.enter(ctx, alone); err != nil {
			leave = func() {}
			return err // shut down while it waited
		}
		// Recorded before the turn runs, so a turn that takes the process
		// down with it is counted though nothing after it runs.
		var starts Starts
		if err := p.write(ctx, log, "record the turn's start", func(ctx context.Context) (err error) {
			starts, err = p.cfg.Inbox.Begin(ctx, it.Seq, alone)
			return err
		}); err != nil {
			return errLeft
		}
		if before := (Starts{All: starts.All - 1, Alone: starts.Alone - b2i(alone)}); p.poison(before) {
			return p.quarantine(ctx, out, it, route, before, log)
		}
		start := time.Now()
		var onText func(string)
		var d *drafter
		if dr, ok := out.(Drafter); ok && p.cfg.Stream {
			d = p.newDrafter(ctx, dr, it, route, log)
			onText = d.update
		}
		tctx, tcancel := context.WithCancel(ctx)
		if !it.Unattended {
			// A tool of the turn may ask its person a question in the chat.
			tctx = tools.WithAsker(tctx, &turnAsker{p: p, out: out, route: route, chatKey: it.Inbound.ChatKey, user: it.Inbound.UserKey,
				event: it.ID, turn: newRef() + newRef()})
		}
		p.mu.Lock()
		p.turns[it.ID] = tcancel
		p.running[it.Inbound.ChatKey] = runningTurn{event: it.ID, user: it.Inbound.UserKey}
		if j.resume {
			p.resumes[it.Inbound.ChatKey]++
		}
		p.mu.Unlock()
		// A voice note is heard first: transcribed once, the transcript
		// stored; one that cannot be heard is answered with a sentence.
		heard, err := p.listen(tctx, out, &it, route, log)
		reply := chat.Reply{Text: heard}
		answered := err == nil && heard == ""
		if answered {
			reply, err = p.turn(tctx, it, j.resume, onText)
		}
		p.mu.Lock()
		delete(p.turns, it.ID)
		if p.running[it.Inbound.ChatKey].event == it.ID {
			delete(p.running, it.Inbound.ChatKey)
		}
		if j.resume {
			p.unresume(it.Inbound.ChatKey)
		}
		stopped := p.cancelled[it.ID]
		delete(p.cancelled, it.ID)
		p.mu.Unlock()
		tcancel()
		if d != nil {
			it.Draft = d.close()
		}
		took = time.Since(start)
		if stopped && ctx.Err() == nil {
			// The person stopped it: done, unanswered, never resumed (so
			// its count of starts no longer matters).
			if err := p.write(ctx, log, "mark the stopped event done", func(ctx context.Context) error {
				return p.cfg.Inbox.Finish(ctx, it.Seq, StateDone)
			}); err != nil {
				return errLeft
			}
			p.cfg.Observer.Turn(p.cfg.Channel, OutcomeStopped, took)
			return ErrTurnStopped
		}
		if ctx.Err() != nil || err != nil {
			// The turn came back: not the process's end.
			p.write(context.WithoutCancel(ctx), log, "record the turn's return", func(ctx context.Context) error {
				return p.cfg.Inbox.Returned(ctx, it.Seq, alone)
			})
		}
		if ctx.Err() != nil {
			log.Info("delivery: turn interrupted (shutdown, or the chat's claim lost); it is answered on a later try")
			return ctx.Err()
		}
		if err != nil {
			return p.failed(ctx, out, it, route, err, log)
		}
		// The question's buttons go with the answer's last part.
		ans := answerOf(out, reply, p.cfg.MaxReply)
		if _, _, command := ParseCommand(it.Inbound.Text); answered && !command && p.cfg.Voice != nil && p.cfg.Voice.Aloud(it.Voice != nil) {
			ans.Speech = reply.Text
		}
		if err := p.write(ctx, log, "store the answer", func(ctx context.Context) error {
			return p.cfg.Inbox.Answer(ctx, it.Seq, ans)
		}); err != nil {
			// Not sent: a later try finds the answer recorded by the
			// engine and sends it then, once.
			return errLeft
		}
		it.Answer, it.Sent = ans, 0
		leave()
		leave = func() {}
	}
	var sendErr error
	// finished: the journal's write of the last part was the inbox's
	// record that the event is done.
	finished := false
	// The answer read aloud, when it is, is its last part.
	total := len(it.Parts)
	if it.Speech != "" {
		total++
	}
	for i := it.Sent; i < total; i++ {
		var err error
		if i == len(it.Parts) {
			err = p.speak(ctx, out, it, route, log)
		} else {
			var draft []byte
			if i == 0 {
				draft = it.Draft
			}
			ask := it.AskFor(i)
			err = p.send(context.WithValue(ctx, partKey{}, fmt.Sprintf("%s:%s:%d", p.cfg.Channel, it.ID, i)), out, route, draft, it.Parts[i], ask, it.Inbound.UserKey)
			if ctx.Err() == nil {
				p.cfg.Observer.Sent(p.cfg.Channel, err == nil)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				log.Info("delivery: sending interrupted (shutdown, or the chat's claim lost); the rest is sent on a later try", "part", i+1, "parts", total)
				return ctx.Err()
			}
			log.Error("delivery: the platform did not take the answer; giving up on it", "part", i+1, "parts", total, "err", err)
			sendErr = err
			break
		}
		// The journal first: one write, the moment the platform took it.
		last := i+1 == total
		recorded, err := p.cfg.Journal.Sent(ctx, it.Seq, i+1, last)
		if err != nil {
			log.Warn("delivery: cannot write the journal of sent parts", "err", err)
		}
		finished = last && recorded
		if !last && !recorded {
			// The last part is recorded by marking the event done: a
			// crash in between repeats only that part, as it would here.
			if p.write(ctx, log, "record a sent part", func(ctx context.Context) error {
				return p.cfg.Inbox.MarkSent(ctx, it.Seq, i+1)
			}) == nil {
				p.cfg.Journal.Recorded(it.Seq)
			}
		}
	}
	// Recorded before anything else (the sign's end may wait on the
	// platform): the shorter the time between the platform taking the
	// last part and this write, the smaller the chance that a crash in
	// between sends it again.
	if !finished {
		if err := p.write(ctx, log, "mark the event done", func(ctx context.Context) error {
			return p.cfg.Inbox.Finish(ctx, it.Seq, StateDone)
		}); err != nil {
			stop()
			return errLeft
		}
		p.cfg.Journal.Recorded(it.Seq)
	}
	stop()
	p.mu.Lock()
	delete(p.attempts, it.Seq)
	p.mu.Unlock()
	p.cfg.Observer.Turn(p.cfg.Channel, OutcomeAnswered, took)
	return sendErr
}

// turn runs the handler, trying again in place while the store reports
// a transient failure. Every try after the first, and every try of an
// event resumed from the inbox, tells the engine to look for what an
// earlier try recorded.
func (p *Pipeline) turn(ctx context.Context, it Item, resume bool, onText func(string)) (chat.Reply, error) {
	in := it.Inbound
	in.ID = p.cfg.Channel + ":" + it.ID
	in.Resume = resume
	in.OnText = onText
	// A scheduled task's run has nobody to approve anything; the inbox
	// keeps that with the event, across restarts.
	in.Unattended = it.Unattended
	var reply chat.Reply
	err := p.cfg.Retry.Do(ctx, transient, func(ctx context.Context) error {
		var err error
		reply, err = p.cfg.Handler.Handle(ctx, in)
		in.Resume = true
		return err
	})
	return reply, err
}

func transient(err error) (bool, time.Duration) { return errors.Is(err, chat.ErrTransient), 0 }

// failed handles a turn that failed: the event stays pending and is tried
// again later, up to MaxAttempts; then it is failed. The person hears a
// true sentence either way.
func (p *Pipeline) failed(ctx context.Context, out Outlet, it Item, route any, err error, log *slog.Logger) error {
	p.mu.Lock()
	p.attempts[it.Seq]++
	n := p.attempts[it.Seq]
	p.mu.Unlock()
	if n >= p.cfg.MaxAttempts {
		log.Error("delivery: the message failed too often; giving up on it", "attempts", n, "err", err)
		p.write(ctx, log, "mark the event failed", func(ctx context.Context) error {
			return p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed)
		})
		p.tell(ctx, out, route, it.Draft, TextFailed, log)
		p.cfg.Observer.Turn(p.cfg.Channel, OutcomeFailed, 0)
		return err
	}
	p.cfg.Observer.Turn(p.cfg.Channel, OutcomeRetrying, 0)
	log.Error("delivery: the message failed; it stays pending and is tried again", "attempt", n, "err", err)
	if n == 1 {
		p.tell(ctx, out, route, nil, TextRetrying, log)
	}
	return errLeft
}

// poison reports whether an event whose turns started and never came
// back as often as before says is to blame for its process's ends: it
// was in flight at MaxStarts of them, and every one after the first came
// while it ran alone (see Gate).
func (p *Pipeline) poison(before Starts) bool {
	return before.All >= p.cfg.MaxStarts && before.Alone >= p.cfg.MaxStarts-1
}

// quarantine sets aside an event whose turn the process ended under
// MaxStarts times, the last of them while it ran alone. It is failed
// first, then the person is told once, with its reference, and the
// chat's later messages run.
func (p *Pipeline) quarantine(ctx context.Context, out Outlet, it Item, route any, before Starts, log *slog.Logger) error {
	ref := p.cfg.Channel + ":" + it.ID
	log.Error("delivery: the process ended each time this message's turn ran, the last times with nothing else running; it is set aside (quarantined)",
		"starts", before.All, "alone", before.Alone, "ref", ref)
	if err := p.write(ctx, log, "quarantine the event", func(ctx context.Context) error {
		return p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed)
	}); err != nil {
		return errLeft
	}
	p.tell(ctx, out, route, it.Draft, fmt.Sprintf(TextQuarantined, ref), log)
	p.cfg.Observer.Turn(p.cfg.Channel, OutcomeQuarantined, 0)
	return fmt.Errorf("bridge: event %s quarantined after %d starts", ref, before.All)
}

// send sends one part once the channel's pacing lets it go; with a
// draft, the part replaces it.
func (p *Pipeline) send(ctx context.Context, out Outlet, route any, draft []byte, part string, ask *Question, user string) error {
	if err := p.pace.wait(ctx, route); err != nil {
		return err
	}
	// A part on its way is not cut the moment the shutdown grace runs
	// out: cut, it may still arrive and then be sent again after the
	// restart. It gets up to sendOverrun more; the wait for the next
	// part is cut at once.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(min(sendOverrun, p.cfg.ShutdownGrace), cancel)
		context.AfterFunc(sctx, func() { t.Stop() })
	})
	defer stop()
	if ask != nil {
		// The question is a message of its own: a draft the model's
		// text streamed into stays as that text.
		if a, ok := out.(Asker); ok {
			return a.Ask(sctx, route, part, *ask, user)
		}
		return out.Send(sctx, route, part+AskHint(*ask))
	}
	if dr, ok := out.(Drafter); ok && draft != nil {
		return dr.Replace(sctx, route, draft, part)
	}
	return out.Send(sctx, route, part)
}

// answerOf is the answer a reply makes: its text, then each question
// that has its own text, each question on the last part of its text.
func answerOf(out Outlet, reply chat.Reply, maxReply int) Answer {
	ans := Answer{Parts: out.Split(capText(reply.Text, maxReply))}
	for _, a := range reply.Asks {
		if a.Text != "" {
			ans.Parts = append(ans.Parts, out.Split(capText(a.Text, maxReply))...)
		}
		ans.Asks = append(ans.Asks, Question{Part: len(ans.Parts) - 1, ID: a.ID, Always: a.Always})
	}
	if len(reply.Asks) == 0 && reply.Ask != "" {
		ans.Asks = []Question{{Part: len(ans.Parts) - 1, ID: reply.Ask}}
	}
	return ans
}

type partKey struct{}

// PartKey names the part being sent, for a channel whose platform takes
// an idempotency key (Discord's nonce): the event and the part's place in
// its answer, the same each time the pipeline sends that part, after a
// restart too. ok is false outside an answer's parts (a notice, a
// sentence of the pipeline's own).
func PartKey(ctx context.Context) (key string, ok bool) {
	key, ok = ctx.Value(partKey{}).(string)
	return key, ok
}

// sendOverrun is how long a part already being sent may take after the
// shutdown grace has run out; never longer than the grace itself.
const sendOverrun = 3 * time.Second

// capText cuts text to at most limit bytes, at a rune boundary, followed by
// TextCut.
func capText(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	cut := max(limit-len(TextCut), 0)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + TextCut
}

// write runs a store call, trying again while it fails; the shutdown
// does not cut it. It logs and returns the last error.
func (p *Pipeline) write(ctx context.Context, log *slog.Logger, what string, fn func(ctx context.Context) error) error {
	err := p.cfg.Retry.Do(context.WithoutCancel(ctx), backoff.Always, fn)
	if err != nil {
		log.Error("delivery: could not "+what, "err", err)
	}
	return err
}

// tell sends a sentence of the pipeline's own, best effort.
func (p *Pipeline) tell(ctx context.Context, out Outlet, route any, draft []byte, text string, log *slog.Logger) {
	if ctx.Err() != nil || route == nil {
		return
	}
	for _, part := range out.Split(text) {
		err := p.send(ctx, out, route, draft, part, nil, "")
		draft = nil
		if err != nil {
			log.Error("delivery: could not tell the person", "err", err)
			return
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
