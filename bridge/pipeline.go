package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"loadout/backoff"
	"loadout/chat"
)

// Handler answers one message; *Router is one. The reply's Ask, when
// set, is the approval its text asks for: the channel shows Approve and
// Deny with the answer's last part.
type Handler interface {
	Handle(ctx context.Context, in chat.Inbound) (chat.Reply, error)
}

// Outlet is what the pipeline needs from a channel to deliver answers.
type Outlet interface {
	// Split cuts an answer into the messages the platform sends, in order.
	Split(text string) []string
	// Send sends one part to route. It retries what the platform lets it
	// retry (rate limits, server errors); an error means the part did not
	// go out.
	Send(ctx context.Context, route []byte, part string) error
}

// Indicator is an optional Outlet feature: a sign that an answer is on
// its way (Telegram's "typing…", a Slack reaction), shown from the start
// of a turn until its answer is sent. stop may be called more than once.
type Indicator interface {
	Working(ctx context.Context, route []byte) (stop func())
}

// Exclusive runs a duty only one process may perform at a time when
// several share a database (polling Telegram, a Slack Socket Mode
// connection): run is called while this process holds the duty, and its
// context ends when the duty is lost. It returns when ctx ends, or with
// run's error. A nil Exclusive runs the duty at once.
type Exclusive func(ctx context.Context, duty string, run func(ctx context.Context) error) error

// Do runs duty exclusively, or at once when e is nil.
func (e Exclusive) Do(ctx context.Context, duty string, run func(ctx context.Context) error) error {
	if e == nil {
		return run(ctx)
	}
	return e(ctx, duty, run)
}

// Asker is an optional Outlet feature: it sends the last part of an
// answer that asks the person to approve a call (approval id) as a
// message of its own, never an edit of text the model wrote, with
// Approve and Deny buttons that only user (the asker's user key) may
// use, each labelled with the approval's code (chat.CodeOf), and the
// code in the text (AskLine). Without it the part goes out with
// AskHint.
type Asker interface {
	Ask(ctx context.Context, route []byte, part, id, user string) error
}

// TextNotYours answers a press of Approve or Deny by anyone but the
// person asked.
const TextNotYours = "Only the person who asked can answer this."

// AskHint ends a question sent by a channel without buttons: the
// commands that answer it, with its code.
func AskHint(id string) string {
	code := chat.CodeOf(id)
	return fmt.Sprintf("\n\nAnswer /approve %s to go ahead or /deny %s to stop.", code, code)
}

// AskLine ends a question sent with buttons: its code, which the buttons
// carry too, so the person can tell it from a question the model wrote.
func AskLine(id string) string {
	code := chat.CodeOf(id)
	return fmt.Sprintf("\n\nRequest %s — the buttons below answer it (or /approve %s, /deny %s).", code, code, code)
}

// PipelineConfig configures a Pipeline. Zero values are the defaults.
type PipelineConfig struct {
	// Channel names the channel ("telegram"); the inbox keeps each
	// channel's events apart.
	Channel string
	Inbox   Inbox
	Handler Handler
	// Outlet sends the answers; the channel itself.
	Outlet Outlet
	// Workers bounds the events handled at once; default 8.
	Workers int
	// ShutdownGrace is how long running turns may finish after Stop;
	// default 30s. Then they are cancelled and resumed after the next
	// start.
	ShutdownGrace time.Duration
	// Retry governs store writes and turns that fail with a transient
	// store error, tried again in place; default 4 attempts from 200ms.
	Retry backoff.Policy
	// RetryEvery is how often events left unfinished by a failure are
	// tried again; default 1m.
	RetryEvery time.Duration
	// MaxAttempts bounds how often one event's turn is tried before the
	// event is failed and the person told; default 5.
	MaxAttempts int
	// MaxStarts bounds how often one event's turn may start without
	// coming back — the process ended under it, by a crash no recover
	// catches, an out-of-memory kill or a power cut — before the event is
	// set aside as poison (delivery.max_attempts); default 3. Each start
	// is recorded in the inbox before the turn runs.
	MaxStarts int
	// Keep is how long finished events are remembered so a redelivery is
	// recognised; default 24h.
	Keep   time.Duration
	Logger *slog.Logger
	// Observer is told about turns and sends; default NopObserver.
	Observer Observer
	// MaxReply caps an answer, in bytes, before it is split; the rest is
	// cut with TextCut. Default DefaultMaxReply.
	MaxReply int
	// Pacing paces the sends by the platform's limits; the zero value
	// does not pace.
	Pacing Pacing
	// Stream shows each answer while it is written, when the Outlet is a
	// Drafter: a draft posted at the first text and edited at most every
	// DraftEvery (default DefaultDraftEvery), then replaced by the
	// answer's first part.
	Stream     bool
	DraftEvery time.Duration
	// Journal, when set, records each part the platform took before the
	// inbox does (see Journal); nil leaves the inbox alone to say.
	Journal *Journal
	// Claim, when set, hands a chat's events to one process at a time
	// across the processes sharing the inbox: before running a chat's
	// event the pipeline claims the chat there, and then runs the chat's
	// oldest unfinished event first, whichever process took it in. The
	// Inbox must then be an OldestFinder.
	Claim Claim
	// Voice transcribes the voice notes people send and speaks answers
	// (see VoiceNote); nil when voice notes are not set up.
	Voice Voice
}

// Claim runs run while this process holds the claim name among the
// processes sharing a database, renewing it as run goes on and giving it
// back after; run's context ends if the claim is lost. It reports false,
// without calling run, when another process holds the claim (and with an
// error when it could not tell).
type Claim func(ctx context.Context, name string, run func(ctx context.Context) error) (ok bool, err error)

// OldestFinder is the Inbox feature claims need: a chat's oldest
// unfinished item, whichever process took it in.
type OldestFinder interface {
	OldestUnfinished(ctx context.Context, channel, chatKey string) (Item, bool, error)
}

// DefaultShutdownGrace is how long running turns may finish after a
// stop unless configured (delivery.shutdown_grace).
const DefaultShutdownGrace = 30 * time.Second

// DefaultMaxReply is the longest answer sent, in bytes.
const DefaultMaxReply = 64 << 10

// Errors of Accept, Deliver and Receive.
var (
	// ErrStopped: the pipeline is shutting down and takes no new events.
	ErrStopped = errors.New("bridge: the channel is shutting down")
	// ErrTurnStopped: the event's turn was stopped by CancelTurn.
	ErrTurnStopped = errors.New("bridge: the turn was stopped")
	// ErrNotStored: the inbox could not store the event.
	ErrNotStored = errors.New("bridge: the event could not be stored")
)

// Pipeline delivers a channel's events: it persists each event, lets
// the channel acknowledge it, runs the turn in per-chat order (chats run
// concurrently, bounded by Workers), persists the answer split into its
// parts, sends the parts one by one marking each as sent, and marks the
// event done. Start resumes whatever an earlier run left pending or
// answered but unsent. Every channel uses one; none keeps its own queue,
// dedupe or retry loop.
type Pipeline struct {
	cfg PipelineConfig
	log *slog.Logger

	ctx    context.Context // the jobs'; cancelled when the grace runs out
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup
	quit   chan struct{}

	pace *pacer

	mu      sync.Mutex
	out     Outlet
	started bool
	stopped bool
	held    []job // accepted before Start finished resuming
	// resumed are the items Start took from the inbox: one whose Accept
	// was still under way then must not be queued a second time.
	resumed map[int64]bool
	// ranSince collects, while the retry sweep reads the inbox, the
	// events whose runs ended meanwhile: what the sweep read of them may
	// be stale (pending, though answered and done since), so it does not
	// queue them again.
	ranSince map[int64]bool
	queues   map[string][]job
	active   map[int64]bool
	attempts map[int64]int
	waiters  map[int64][]chan error
	// turns cancel the turns running now, by event id; cancelled are
	// those CancelTurn stopped.
	turns     map[string]context.CancelFunc
	cancelled map[string]bool
	// voiceOff are the chats told that voice notes are not set up.
	voiceOff map[string]bool
}

type job struct {
	it     Item
	resume bool
}

// NewPipeline returns a pipeline. It stores events from the start; it
// runs them once Start is called, when the channel can send.
func NewPipeline(cfg PipelineConfig) *Pipeline {
	if cfg.Workers < 1 {
		cfg.Workers = 8
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Retry.Attempts == 0 {
		cfg.Retry.Attempts = 4
	}
	if cfg.Retry.Initial == 0 {
		cfg.Retry.Initial = 200 * time.Millisecond
	}
	if cfg.Retry.Max == 0 {
		cfg.Retry.Max = 5 * time.Second
	}
	if cfg.RetryEvery <= 0 {
		cfg.RetryEvery = time.Minute
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.MaxStarts <= 0 {
		cfg.MaxStarts = 3
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.MaxReply <= 0 {
		cfg.MaxReply = DefaultMaxReply
	}
	if cfg.DraftEvery <= 0 {
		cfg.DraftEvery = DefaultDraftEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pipeline{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, out: cfg.Outlet, pace: newPacer(cfg.Pacing),
		sem: make(chan struct{}, cfg.Workers), quit: make(chan struct{}),
		queues: map[string][]job{}, active: map[int64]bool{}, attempts: map[int64]int{}, waiters: map[int64][]chan error{},
		turns: map[string]context.CancelFunc{}, cancelled: map[string]bool{}, voiceOff: map[string]bool{},
	}
}

// Start resumes the channel's unfinished events, then runs accepted
// events as they come. It waits out store errors while reading the inbox
// and returns ctx.Err() if ctx ends first.
func (p *Pipeline) Start(ctx context.Context) error {
	var items []Item
	patient := p.cfg.Retry
	patient.Attempts, patient.Max = 0, time.Minute
	// What the platform took before the last process could record it.
	patient.Do(ctx, backoff.Always, func(ctx context.Context) error {
		err := p.cfg.Journal.replay(func(seq int64, sent int, done bool) error {
			var err error
			if done {
				err = p.cfg.Inbox.Finish(ctx, seq, StateDone)
			} else {
				err = p.cfg.Inbox.MarkSent(ctx, seq, sent)
			}
			if errors.Is(err, chat.ErrNotFound) {
				return nil // forgotten since (Keep)
			}
			return err
		})
		if err != nil {
			p.log.Error("delivery: cannot apply the journal of sent parts; retrying", "channel", p.cfg.Channel, "err", err)
		}
		return err
	})
	patient.Do(ctx, backoff.Always, func(ctx context.Context) error {
		var err error
		items, err = p.cfg.Inbox.Unfinished(ctx, p.cfg.Channel)
		if err != nil {
			p.log.Error("delivery: cannot read the inbox; retrying", "channel", p.cfg.Channel, "err", err)
		}
		return err
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(items) > 0 {
		p.log.Info("delivery: resuming messages left unfinished", "channel", p.cfg.Channel, "count", len(items))
	}
	p.mu.Lock()
	p.resumed = make(map[int64]bool, len(items))
	for _, it := range items {
		p.resumed[it.Seq] = true
		p.enqueue(job{it, true})
	}
	for _, j := range p.held {
		p.enqueue(j)
	}
	p.held, p.started = nil, true
	p.mu.Unlock()
	p.wg.Add(1)
	go p.sweep()
	return nil
}

// Stop stops intake, lets queued and running events finish for the
// shutdown grace, then cancels them and waits for them to return. What
// was cut stays in the inbox for the next start.
func (p *Pipeline) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.mu.Unlock()
	close(p.quit)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	t := time.NewTimer(p.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.cancel()
		<-done
	}
	p.cancel()
}

// Accept persists an event and queues it. It reports false for a
// redelivery, which is dropped. An error means the event was not stored:
// the channel must not acknowledge it, so the platform delivers it again.
func (p *Pipeline) Accept(ctx context.Context, pend Pending) (bool, error) {
	fresh, _, err := p.accept(ctx, pend, false)
	return fresh, err
}

// Deliver is Accept that waits until the event is finished: answered and
// sent, failed, or left for a later try (then it returns an error).
func (p *Pipeline) Deliver(ctx context.Context, pend Pending) error {
	_, done, err := p.accept(ctx, pend, true)
	if err != nil || done == nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CancelTurn stops the turn of event id if it is running: the turn's
// context is cancelled, and the event is finished without an answer and
// never resumed (its Deliver returns ErrTurnStopped). It reports whether
// a turn was running.
func (p *Pipeline) CancelTurn(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cancel, ok := p.turns[id]
	if ok {
		p.cancelled[id] = true
		cancel()
	}
	return ok
}

// Notify sends text to a chat outside a turn, in the chat's order with
// its turns, and waits until it is sent.
func (p *Pipeline) Notify(ctx context.Context, chatKey string, route []byte, text string) error {
	return p.Deliver(ctx, Pending{ID: "notice:" + newRef(), Inbound: chat.Inbound{ChatKey: chatKey}, Route: route, Reply: text})
}

func (p *Pipeline) accept(ctx context.Context, pend Pending, wait bool) (bool, <-chan error, error) {
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return false, nil, ErrStopped
	}
	if pend.ID == "" {
		return false, nil, errors.New("bridge: an event needs an id")
	}
	var parts []string
	if pend.Reply != "" {
		parts = p.out.Split(pend.Reply)
	}
	it, fresh, err := p.cfg.Inbox.Accept(ctx, p.cfg.Channel, pend, parts)
	if err != nil {
		return false, nil, fmt.Errorf("%w: event %s: %w", ErrNotStored, pend.ID, err)
	}
	if !fresh {
		p.log.Debug("delivery: event delivered again; ignored", "channel", p.cfg.Channel, "event", pend.ID)
		return false, nil, nil
	}
	var done chan error
	p.mu.Lock()
	defer p.mu.Unlock()
	if wait {
		done = make(chan error, 1)
		p.waiters[it.Seq] = append(p.waiters[it.Seq], done)
	}
	switch {
	case !p.started:
		p.held = append(p.held, job{it, false})
	case p.resumed[it.Seq]:
		// Stored before Start read the inbox: Start has queued it, and
		// it may be finished already.
		delete(p.resumed, it.Seq)
		if done != nil && !p.active[it.Seq] {
			delete(p.waiters, it.Seq)
			done <- nil
		}
	case !p.stopped:
		p.enqueue(job{it, false})
	}
	return true, done, nil
}

// Seen reports whether the channel already stored the event id: a
// channel asks before work that must not be done twice for a redelivered
// event, such as downloading a file a person sent.
func (p *Pipeline) Seen(ctx context.Context, id string) (bool, error) {
	return p.cfg.Inbox.Seen(ctx, p.cfg.Channel, id)
}

// Receive runs build for one raw platform event under the pipeline's
// protection and accepts the Pending it returns; ok=false ignores the
// event. A panic in build is recovered and logged with the event id, and
// the event is recorded as failed, so a redelivery is dropped rather than
// parsed again; when fallback has a route, the person is told there.
func (p *Pipeline) Receive(ctx context.Context, id string, fallback Pending, build func() (Pending, bool)) (accepted bool, err error) {
	pend, ok, panicked := safeBuild(build)
	if panicked != nil {
		p.log.Error("delivery: reading an event panicked; it is recorded as failed", "channel", p.cfg.Channel,
			"event", id, "panic", fmt.Sprint(panicked.value), "stack", string(panicked.stack))
		rec := Pending{ID: id, Inbound: chat.Inbound{ChatKey: fallback.Inbound.ChatKey}, Route: fallback.Route}
		it, fresh, err := p.cfg.Inbox.Accept(ctx, p.cfg.Channel, rec, nil)
		if err != nil {
			return false, fmt.Errorf("%w: event %s: %w", ErrNotStored, id, err)
		}
		if !fresh {
			return false, nil
		}
		if err := p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed); err != nil {
			p.log.Error("delivery: could not mark the event failed", "event", id, "err", err)
		}
		if len(fallback.Route) > 0 && fallback.Inbound.ChatKey != "" {
			rec.ID, rec.Reply = id+":failed", TextFailed
			return p.Accept(ctx, rec)
		}
		return false, nil
	}
	if !ok {
		return false, nil
	}
	if pend.ID == "" {
		pend.ID = id
	}
	return p.Accept(ctx, pend)
}

type panicValue struct {
	value any
	stack []byte
}

func safeBuild(build func() (Pending, bool)) (pend Pending, ok bool, pv *panicValue) {
	defer func() {
		if r := recover(); r != nil {
			pv = &panicValue{r, debug.Stack()}
		}
	}()
	pend, ok = build()
	return pend, ok, nil
}

// enqueue queues j behind its chat's earlier events; p.mu must be held.
func (p *Pipeline) enqueue(j job) {
	if p.active[j.it.Seq] {
		return
	}
	p.active[j.it.Seq] = true
	p.wg.Add(1)
	key := j.it.Inbound.ChatKey
	q, running := p.queues[key]
	p.queues[key] = append(q, j)
	if !running {
		go p.drain(key)
	}
}

// drain runs one chat's queue in order, one event at a time.
func (p *Pipeline) drain(key string) {
	for {
		p.mu.Lock()
		q := p.queues[key]
		if len(q) == 0 {
			delete(p.queues, key)
			p.mu.Unlock()
			return
		}
		j := q[0]
		p.queues[key] = q[1:]
		out := p.out
		p.mu.Unlock()

		var err error
		if p.ctx.Err() != nil {
			err = p.ctx.Err() // cut at shutdown before it began
		} else {
			p.sem <- struct{}{}
			if p.cfg.Claim != nil {
				err = p.claimed(p.ctx, out, j)
			} else {
				err = p.run(p.ctx, out, j)
			}
			<-p.sem
		}
		if errors.Is(err, errClaimed) {
			// Another process has the chat: this event waits its turn.
			p.mu.Lock()
			delete(p.active, j.it.Seq)
			p.mu.Unlock()
			p.wg.Done()
			time.AfterFunc(claimRetry, func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				if !p.stopped {
					p.enqueue(j)
				}
			})
			continue
		}
		p.mu.Lock()
		delete(p.active, j.it.Seq)
		if p.ranSince != nil {
			p.ranSince[j.it.Seq] = true
		}
		ws := p.waiters[j.it.Seq]
		delete(p.waiters, j.it.Seq)
		p.mu.Unlock()
		for _, w := range ws {
			w <- err
		}
		p.wg.Done()
	}
}

// errClaimed marks an event whose chat another process is serving.
var errClaimed = errors.New("bridge: another process is answering this chat")

// claimRetry is how soon an event whose chat another process serves is
// tried again.
const claimRetry = 100 * time.Millisecond

// claimed runs j under its chat's claim: it runs the chat's unfinished
// events oldest first — those other processes took in too, which a
// process that died left behind — up to and including j.
func (p *Pipeline) claimed(ctx context.Context, out Outlet, j job) error {
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
			// Another process may have begun it: its turn resumes.
			if err := p.run(ctx, out, job{it: it, resume: j.resume || !mine || it.State != StatePending}); err != nil || mine {
				return err
			}
		}
	})
	switch {
	case !ok && err != nil:
		p.log.Error("delivery: cannot claim the chat; trying again later", "chat", j.it.Inbound.ChatKey, "err", err)
		return errLeft
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
	defer func() {
		if r := recover(); r != nil {
			log.Error("delivery: handling the event panicked; it is marked failed", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			p.write(ctx, log, "mark the event failed", func(ctx context.Context) error {
				return p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed)
			})
			p.tell(ctx, out, it.Route, it.Draft, TextFailed, log)
			p.cfg.Observer.Turn(p.cfg.Channel, OutcomeFailed, 0)
			err = fmt.Errorf("bridge: event %s panicked: %v", it.ID, r)
		}
	}()
	// The sign shows during a turn; an answered event resumed after a
	// restart shows it too, briefly, so a sign an earlier process left
	// behind (a Slack reaction) is taken down when its answer is sent.
	stop := func() {}
	if ind, ok := out.(Indicator); ok && (it.State == StatePending || j.resume) {
		stop = ind.Working(ctx, it.Route)
	}
	defer stop()
	var took time.Duration
	if it.State == StatePending {
		// Recorded before the turn runs, so a turn that takes the process
		// down with it is counted though nothing after it runs.
		var starts int
		if err := p.write(ctx, log, "record the turn's start", func(ctx context.Context) (err error) {
			starts, err = p.cfg.Inbox.Begin(ctx, it.Seq)
			return err
		}); err != nil {
			return errLeft
		}
		if starts > p.cfg.MaxStarts {
			return p.quarantine(ctx, out, it, starts-1, log)
		}
		start := time.Now()
		var onText func(string)
		var d *drafter
		if dr, ok := out.(Drafter); ok && p.cfg.Stream {
			d = p.newDrafter(ctx, dr, it, log)
			onText = d.update
		}
		tctx, tcancel := context.WithCancel(ctx)
		p.mu.Lock()
		p.turns[it.ID] = tcancel
		p.mu.Unlock()
		// A voice note is heard first: transcribed once, the transcript
		// stored; one that cannot be heard is answered with a sentence.
		heard, err := p.listen(tctx, out, &it, log)
		reply := chat.Reply{Text: heard}
		answered := err == nil && heard == ""
		if answered {
			reply, err = p.turn(tctx, it, j.resume, onText)
		}
		p.mu.Lock()
		delete(p.turns, it.ID)
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
				return p.cfg.Inbox.Returned(ctx, it.Seq)
			})
		}
		if ctx.Err() != nil {
			log.Info("delivery: turn interrupted (shutdown, or the chat's claim lost); it is answered on a later try")
			return ctx.Err()
		}
		if err != nil {
			return p.failed(ctx, out, it, err, log)
		}
		// The question's buttons go with the answer's last part.
		ans := Answer{Parts: out.Split(capText(reply.Text, p.cfg.MaxReply)), Ask: reply.Ask}
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
	}
	var sendErr error
	// The answer read aloud, when it is, is its last part.
	total := len(it.Parts)
	if it.Speech != "" {
		total++
	}
	for i := it.Sent; i < total; i++ {
		var err error
		if i == len(it.Parts) {
			err = p.speak(ctx, out, it, log)
		} else {
			var draft []byte
			if i == 0 {
				draft = it.Draft
			}
			ask := ""
			if i == len(it.Parts)-1 {
				ask = it.Ask
			}
			err = p.send(ctx, out, it.Route, draft, it.Parts[i], ask, it.Inbound.UserKey)
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
		if err := p.cfg.Journal.sent(it.Seq, i+1, i+1 == total); err != nil {
			log.Warn("delivery: cannot write the journal of sent parts", "err", err)
		}
		if i+1 < total {
			// The last part is recorded by marking the event done: a
			// crash in between repeats only that part, as it would here.
			if p.write(ctx, log, "record a sent part", func(ctx context.Context) error {
				return p.cfg.Inbox.MarkSent(ctx, it.Seq, i+1)
			}) == nil {
				p.cfg.Journal.recorded(it.Seq)
			}
		}
	}
	// Recorded before anything else (the sign's end may wait on the
	// platform): the shorter the time between the platform taking the
	// last part and this write, the smaller the chance that a crash in
	// between sends it again.
	if err := p.write(ctx, log, "mark the event done", func(ctx context.Context) error {
		return p.cfg.Inbox.Finish(ctx, it.Seq, StateDone)
	}); err != nil {
		stop()
		return errLeft
	}
	p.cfg.Journal.recorded(it.Seq)
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
func (p *Pipeline) failed(ctx context.Context, out Outlet, it Item, err error, log *slog.Logger) error {
	p.mu.Lock()
	p.attempts[it.Seq]++
	n := p.attempts[it.Seq]
	p.mu.Unlock()
	if n >= p.cfg.MaxAttempts {
		log.Error("delivery: the message failed too often; giving up on it", "attempts", n, "err", err)
		p.write(ctx, log, "mark the event failed", func(ctx context.Context) error {
			return p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed)
		})
		p.tell(ctx, out, it.Route, it.Draft, TextFailed, log)
		p.cfg.Observer.Turn(p.cfg.Channel, OutcomeFailed, 0)
		return err
	}
	p.cfg.Observer.Turn(p.cfg.Channel, OutcomeRetrying, 0)
	log.Error("delivery: the message failed; it stays pending and is tried again", "attempt", n, "err", err)
	if n == 1 {
		p.tell(ctx, out, it.Route, nil, TextRetrying, log)
	}
	return errLeft
}

// quarantine sets aside an event whose turn started MaxStarts times and
// never came back: each time, the process ended under it. It is failed
// first, then the person is told once, with its reference, and the
// chat's later messages run.
func (p *Pipeline) quarantine(ctx context.Context, out Outlet, it Item, starts int, log *slog.Logger) error {
	ref := p.cfg.Channel + ":" + it.ID
	log.Error("delivery: a message's turn started and never came back, each time the process ended under it; it is set aside (quarantined)",
		"starts", starts, "ref", ref)
	if err := p.write(ctx, log, "quarantine the event", func(ctx context.Context) error {
		return p.cfg.Inbox.Finish(ctx, it.Seq, StateFailed)
	}); err != nil {
		return errLeft
	}
	p.tell(ctx, out, it.Route, it.Draft, fmt.Sprintf(TextQuarantined, ref), log)
	p.cfg.Observer.Turn(p.cfg.Channel, OutcomeQuarantined, 0)
	return fmt.Errorf("bridge: event %s quarantined after %d starts", ref, starts)
}

// send sends one part once the channel's pacing lets it go; with a
// draft, the part replaces it.
func (p *Pipeline) send(ctx context.Context, out Outlet, route, draft []byte, part, ask, user string) error {
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
	if ask != "" {
		// The question is a message of its own: a draft the model's
		// text streamed into stays as that text.
		if a, ok := out.(Asker); ok {
			return a.Ask(sctx, route, part, ask, user)
		}
		return out.Send(sctx, route, part+AskHint(ask))
	}
	if dr, ok := out.(Drafter); ok && draft != nil {
		return dr.Replace(sctx, route, draft, part)
	}
	return out.Send(sctx, route, part)
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
func (p *Pipeline) tell(ctx context.Context, out Outlet, route, draft []byte, text string, log *slog.Logger) {
	if ctx.Err() != nil || len(route) == 0 {
		return
	}
	for _, part := range out.Split(text) {
		err := p.send(ctx, out, route, draft, part, "", "")
		draft = nil
		if err != nil {
			log.Error("delivery: could not tell the person", "err", err)
			return
		}
	}
}

// sweep tries unfinished events again every RetryEvery and forgets
// finished ones after Keep, until Stop, which waits for it.
func (p *Pipeline) sweep() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.RetryEvery)
	defer t.Stop()
	p.prune()
	lastPrune := time.Now()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		p.mu.Lock()
		p.ranSince = map[int64]bool{}
		p.mu.Unlock()
		items, err := p.cfg.Inbox.Unfinished(p.ctx, p.cfg.Channel)
		p.mu.Lock()
		ran := p.ranSince
		p.ranSince = nil
		if err == nil && !p.stopped {
			for _, it := range items {
				// An event that ran while the inbox was read is left to the
				// next sweep, which reads it as it is now.
				if !ran[it.Seq] {
					p.enqueue(job{it, true})
				}
			}
		}
		p.mu.Unlock()
		if err != nil {
			p.log.Warn("delivery: cannot read the inbox to retry messages", "channel", p.cfg.Channel, "err", err)
			continue
		}
		if time.Since(lastPrune) > time.Hour {
			p.prune()
			lastPrune = time.Now()
		}
	}
}

func (p *Pipeline) prune() {
	p.pace.forget(10 * time.Minute)
	n, err := p.cfg.Inbox.Prune(p.ctx, time.Now().Add(-p.cfg.Keep))
	if err != nil {
		p.log.Warn("delivery: cannot prune the inbox", "err", err)
	} else if n > 0 {
		p.log.Debug("delivery: pruned finished events", "channel", p.cfg.Channel, "count", n)
	}
}

// newRef returns a short random reference id.
func newRef() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
