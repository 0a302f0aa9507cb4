package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"loadout/backoff"
	"loadout/chat"
)

// Handler answers one message; *Router is one. The reply's Ask, when
// set, is the approval its text asks for: the channel shows Approve and
// Deny with the answer's last part.
type Handler interface {
	Handle(ctx context.Context, in chat.Inbound) (chat.Reply, error)
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
	// MaxStarts bounds how often the process may end under one event's
	// turn — a crash no recover catches, an out-of-memory kill — before
	// the event is set aside as poison (delivery.max_attempts); default
	// 3. Each start is recorded in the inbox before the turn runs. After
	// the first such end the turn runs alone in its process (see Gate),
	// and only the ends of those lone runs count further: a kill from
	// outside with innocent turns in flight is not held against them.
	MaxStarts int
	// Gate lets a turn run alone in the process; every pipeline of a
	// process shares one. Nil: a Gate of this pipeline's own, made by
	// NewPipeline with the default settling time.
	Gate *Gate
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
	Journal Journal
	// Claim, when set, hands a chat's events to one process at a time
	// across the processes sharing the inbox: before running a chat's
	// event the pipeline claims the chat there, and then runs the chat's
	// oldest unfinished event first, whichever process took it in. The
	// Inbox must then be an OldestFinder.
	Claim Claim
	// Voice transcribes the voice notes people send and speaks answers
	// (see VoiceNote); nil when voice notes are not set up.
	Voice Voice
	// QuestionPoll is how often a turn waiting on a question reads it in
	// the store besides being told; default DefaultQuestionPoll. An
	// asker silent for ten times as long is taken to have ended.
	QuestionPoll time.Duration
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
	// retrying counts events another process had claimed, waiting
	// claimRetry to be queued again.
	retrying int
	// quiet is closed when an event leaves active or retrying (calmer),
	// to wake Idle; nil until Idle waits.
	quiet    chan struct{}
	attempts map[int64]int
	waiters  map[int64][]chan error
	// turns cancel the turns running now, by event id; cancelled are
	// those CancelTurn stopped.
	turns     map[string]context.CancelFunc
	cancelled map[string]bool
	// running are the turns running now by chat: their event and person,
	// for /cancel.
	running map[string]runningTurn
	// voiceOff are the chats told that voice notes are not set up.
	voiceOff map[string]bool
	// questions keeps the questions turns ask, when the Inbox does;
	// signals, when the Inbox has them, tells other processes of answers.
	questions Questions
	signals   Signals
	// asking wakes the runs of turns of this process that wait on a
	// question, by run (AskedQuestion.Turn); askingIn counts them by
	// chat. resumes counts, by chat, the events queued here to be
	// resumed and the resumed turns running here (see mayAsk).
	asking   map[string]chan struct{}
	askingIn map[string]int
	resumes  map[string]int
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
	if cfg.Gate == nil {
		cfg.Gate = NewGate(0)
	}
	if cfg.Journal == nil {
		cfg.Journal = (*FileJournal)(nil) // keeps nothing
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
	if cfg.QuestionPoll <= 0 {
		cfg.QuestionPoll = DefaultQuestionPoll
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pipeline{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, out: cfg.Outlet, pace: newPacer(cfg.Pacing),
		sem: make(chan struct{}, cfg.Workers), quit: make(chan struct{}),
		queues: map[string][]job{}, active: map[int64]bool{}, attempts: map[int64]int{}, waiters: map[int64][]chan error{},
		turns: map[string]context.CancelFunc{}, cancelled: map[string]bool{}, running: map[string]runningTurn{}, voiceOff: map[string]bool{},
		asking: map[string]chan struct{}{}, askingIn: map[string]int{}, resumes: map[string]int{},
	}
	p.questions, _ = cfg.Inbox.(Questions)
	p.signals, _ = cfg.Inbox.(Signals)
	return p
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
		err := p.cfg.Journal.Replay(ctx, func(seq int64, sent int, done bool) error {
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
		if err != nil && ctx.Err() == nil { // else the stop cut it
			p.log.Error("delivery: cannot apply the journal of sent parts; retrying", "channel", p.cfg.Channel, "err", err)
		}
		return err
	})
	patient.Do(ctx, backoff.Always, func(ctx context.Context) error {
		var err error
		items, err = p.cfg.Inbox.Unfinished(ctx, p.cfg.Channel)
		if err != nil && ctx.Err() == nil { // else the stop cut it
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
		p.enqueue(job{it: it, resume: true})
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
	// Every run has returned: what the journal still holds that the
	// inbox recorded need not be applied again at the next start.
	if fj, ok := p.cfg.Journal.(*FileJournal); ok {
		fj.compact()
	}
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

// runningTurn is a turn running in a chat: its event and its person.
type runningTurn struct{ event, user string }

// TextStopped answers a /cancel that stopped a turn.
const TextStopped = "Stopped: I left what I was doing, sub-agents included. What was done before is kept."

// stopFor stops the turn running in in's chat when in is its person's
// /cancel, and no question of the turn waits (a /cancel then answers the
// question): the turn's context ends, its sub-agents with it, and it is
// finished without an answer. It reports whether it stopped one.
func (p *Pipeline) stopFor(in chat.Inbound) bool {
	if name, _, ok := ParseCommand(in.Text); !ok || name != "cancel" {
		return false
	}
	p.mu.Lock()
	r, ok := p.running[in.ChatKey]
	asking := p.mayAsk(in.ChatKey)
	p.mu.Unlock()
	if !ok || asking || r.user != in.UserKey {
		return false
	}
	return p.CancelTurn(r.event)
}

// statusNow answers /status in a chat where a turn runs now, without
// waiting for it; "" when in is not that.
func (p *Pipeline) statusNow(ctx context.Context, in chat.Inbound) string {
	if name, _, ok := ParseCommand(in.Text); !ok || name != "status" {
		return ""
	}
	p.mu.Lock()
	_, running := p.running[in.ChatKey]
	p.mu.Unlock()
	if !running {
		return ""
	}
	r, err := p.cfg.Handler.Handle(ctx, in)
	if err != nil {
		return ""
	}
	return r.Text
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
	if pend.Reply == "" && p.stopFor(pend.Inbound) {
		pend.Reply = TextStopped
	}
	aside := false
	if pend.Reply == "" {
		// /status while a turn runs in the chat answers at once, beside
		// the chat's queue: it reads, and what it shows (the sub-agents
		// running) is of now.
		pend.Reply = p.statusNow(ctx, pend.Inbound)
		aside = pend.Reply != ""
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
	busy := p.mayAsk(pend.Inbound.ChatKey)
	out := p.out
	p.mu.Unlock()
	if busy && p.answers(ctx, out, it, false) {
		// An answer to a question a running turn waits on: taken, and
		// done without a turn of its own.
		if wait {
			done = make(chan error, 1)
			done <- nil
		}
		return true, done, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if wait {
		done = make(chan error, 1)
		p.waiters[it.Seq] = append(p.waiters[it.Seq], done)
	}
	switch {
	case !p.started:
		p.held = append(p.held, job{it: it, checked: busy})
	case p.resumed[it.Seq]:
		// Stored before Start read the inbox: Start has queued it, and
		// it may be finished already.
		delete(p.resumed, it.Seq)
		if done != nil && !p.active[it.Seq] {
			delete(p.waiters, it.Seq)
			done <- nil
		}
	case !p.stopped:
		p.enqueue(job{it: it, checked: busy, aside: aside})
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
// parsed again; fallbackOf, called then only, says where the person is
// told (its route and chat key; a Pending without them tells no one).
func (p *Pipeline) Receive(ctx context.Context, id string, fallbackOf func() Pending, build func() (Pending, bool)) (accepted bool, err error) {
	pend, ok, panicked := safeBuild(build)
	if panicked != nil {
		p.log.Error("delivery: reading an event panicked; it is recorded as failed", "channel", p.cfg.Channel,
			"event", id, "panic", fmt.Sprint(panicked.value), "stack", string(panicked.stack))
		var fallback Pending
		if fallbackOf != nil {
			fallback, _, _ = safeBuild(func() (Pending, bool) { return fallbackOf(), true })
		}
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
