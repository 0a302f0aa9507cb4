package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"loadout/backoff"
	"loadout/bridge"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store"
	"loadout/store/storetest"

	"golang.org/x/time/rate"
)

// outlet is a channel that records what it sends. Parts of an answer are
// separated by "|".
type outlet struct {
	mu   sync.Mutex
	sent []string
	// block, when set, holds a part until ctx ends.
	block func(part string) bool
	// fail, when set, refuses a part for good.
	fail func(part string) error
}

func (o *outlet) Split(text string) []string { return strings.Split(text, "|") }

// ReadRoute: a test's routes are the chat's name.
func (o *outlet) ReadRoute(raw []byte) (any, error) { return string(raw), nil }

func (o *outlet) Send(ctx context.Context, route any, part string) error {
	if o.block != nil && o.block(part) {
		<-ctx.Done()
		return ctx.Err()
	}
	if o.fail != nil {
		if err := o.fail(part); err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, route.(string)+":"+part)
	return nil
}

func (o *outlet) got() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.sent)
}

func (o *outlet) waitFor(t *testing.T, n int) []string {
	t.Helper()
	chattest.Eventually(t, fmt.Sprintf("%d parts sent", n), func() bool { return len(o.got()) >= n })
	return o.got()
}

type handlerFunc func(ctx context.Context, in chat.Inbound) (string, error)

func (f handlerFunc) Handle(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
	text, err := f(ctx, in)
	return chat.Reply{Text: text}, err
}

type replyFunc func(ctx context.Context, in chat.Inbound) (chat.Reply, error)

func (f replyFunc) Handle(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
	return f(ctx, in)
}

func openStore(t *testing.T) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loadout.db")
	return reopen(t, path), path
}

// reopen opens the store at path again, as another process (or the same
// after a restart) would; it is closed when the test ends.
func reopen(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func pending(id, chatKey, text string) bridge.Pending {
	return bridge.Pending{ID: id, Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "u", Text: text}, Route: []byte(chatKey)}
}

func newPipeline(t *testing.T, cfg bridge.PipelineConfig) *bridge.Pipeline {
	t.Helper()
	cfg.Channel = "test"
	cfg.Retry = backoff.Policy{Attempts: 3, Initial: time.Millisecond, Max: 2 * time.Millisecond}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	p := bridge.NewPipeline(cfg)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func accept(t *testing.T, p *bridge.Pipeline, pend bridge.Pending) {
	t.Helper()
	if fresh, err := p.Accept(context.Background(), pend); err != nil || !fresh {
		t.Fatalf("Accept(%s) = %v, %v", pend.ID, fresh, err)
	}
}

func itemState(t *testing.T, db *store.DB, id string) (state string, sent int) {
	t.Helper()
	row := db.Gorm().Raw("SELECT state, sent FROM inbox_items WHERE event_id = ?", id).Row()
	if err := row.Scan(&state, &sent); err != nil {
		t.Fatalf("item %s: %v", id, err)
	}
	return state, sent
}

// One chat's events run one at a time in arrival order while another
// chat's event runs at the same time: a1 cannot finish until b1 has
// started, so a global lock would never finish.
func TestPipelineOrdersEachChatAndOverlapsChats(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	bStarted := make(chan struct{})
	var mu sync.Mutex
	var events []string
	note := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Workers: 4,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			note("start " + in.Text)
			switch in.Text {
			case "a1":
				select {
				case <-bStarted:
				case <-time.After(10 * time.Second):
					return "", errors.New("b1 never ran while a1 was running")
				}
			case "b1":
				close(bStarted)
			}
			note("end " + in.Text)
			return "re " + in.Text, nil
		})})
	accept(t, p, pending("1", "A", "a1"))
	accept(t, p, pending("2", "A", "a2"))
	accept(t, p, pending("3", "B", "b1"))
	out.waitFor(t, 3)
	mu.Lock()
	defer mu.Unlock()
	at := func(s string) int { return slices.Index(events, s) }
	if at("start b1") > at("end a1") {
		t.Errorf("b1 did not run while a1 was running: %v", events)
	}
	if at("start a2") < at("end a1") {
		t.Errorf("a2 started before a1 ended: %v", events)
	}
	sent := out.got()
	if slices.Index(sent, "A:re a1") > slices.Index(sent, "A:re a2") {
		t.Errorf("chat A answered out of order: %v", sent)
	}
}

func TestPipelineBoundsWorkers(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	var running, peak atomic.Int32
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Workers: 2,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			n := running.Add(1)
			for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
			}
			time.Sleep(3 * time.Millisecond)
			running.Add(-1)
			return "ok", nil
		})})
	for i := range 12 {
		accept(t, p, pending(fmt.Sprint(i), fmt.Sprintf("chat%d", i%6), "m"))
	}
	out.waitFor(t, 12)
	if peak.Load() > 2 {
		t.Fatalf("%d turns ran at once, want at most 2", peak.Load())
	}
}

func TestPipelineDropsRedeliveries(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	var calls atomic.Int32
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			calls.Add(1)
			if !strings.HasPrefix(in.ID, "test:ev") || in.Resume {
				t.Errorf("inbound id %q resume %v", in.ID, in.Resume)
			}
			return "once", nil
		})})
	accept(t, p, pending("ev1", "A", "hi"))
	out.waitFor(t, 1)
	if fresh, err := p.Accept(context.Background(), pending("ev1", "A", "hi")); fresh || err != nil {
		t.Fatalf("redelivery Accept = %v, %v", fresh, err)
	}
	accept(t, p, pending("ev2", "A", "next"))
	out.waitFor(t, 2)
	if n := calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// Stopped while the second of three parts is in flight, a new pipeline on
// the same database sends the second and third parts, and not the first,
// without running the turn again.
func TestPipelineResumesAtFirstUnsentPart(t *testing.T) {
	db, path := openStore(t)
	out := &outlet{block: func(part string) bool { return part == "two" }}
	var calls atomic.Int32
	h := handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
		calls.Add(1)
		return "one|two|three", nil
	})
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: db, Outlet: out, Handler: h,
		ShutdownGrace: time.Millisecond, Logger: quiet()})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	accept(t, p, pending("ev", "A", "long please"))
	out.waitFor(t, 1)
	p.Stop()
	if state, sent := itemState(t, db, "ev"); state != "answered" || sent != 1 {
		t.Fatalf("after the stop: %s with %d sent, want answered with 1", state, sent)
	}

	db2 := reopen(t, path)
	out.block = nil
	newPipeline(t, bridge.PipelineConfig{Inbox: db2, Outlet: out, Handler: h})
	sent := out.waitFor(t, 3)
	chattest.Eventually(t, "the item done", func() bool { s, _ := itemState(t, db2, "ev"); return s == "done" })
	if want := []string{"A:one", "A:two", "A:three"}; !slices.Equal(out.got(), want) {
		t.Fatalf("sent %v, want %v", sent, want)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the turn ran %d times, want 1", n)
	}
}

// A panicking turn fails its event (not retried), the person hears a plain
// sentence, and the next event is handled.
func TestPipelineRecoversPanics(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	logs := &chattest.LogBuffer{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Logger: logger(logs),
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			if in.Text == "boom" {
				var m map[string]int
				m["x"]++ // a nil map write panics
			}
			return "fine", nil
		})})
	accept(t, p, pending("ev1", "A", "boom"))
	accept(t, p, pending("ev2", "A", "after"))
	sent := out.waitFor(t, 2)
	if sent[0] != "A:"+bridge.TextFailed || sent[1] != "A:fine" {
		t.Fatalf("sent %v", sent)
	}
	if s, _ := itemState(t, db, "ev1"); s != "failed" {
		t.Fatalf("panicked event is %s, want failed", s)
	}
	if !strings.Contains(logs.String(), "event=ev1") || !strings.Contains(logs.String(), "panicked") {
		t.Fatalf("the panic is not logged with the event id:\n%s", logs.String())
	}
}

// A panic while reading a raw event is recorded against the event id: the
// person (when known) is told once, and a redelivery is dropped.
func TestReceiveRecoversParsePanics(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "ok", nil })})
	fallback := bridge.Pending{Inbound: chat.Inbound{ChatKey: "A"}, Route: []byte("A")}
	var builds atomic.Int32
	build := func() (bridge.Pending, bool) {
		builds.Add(1)
		var s []int
		_ = s[3]
		return bridge.Pending{}, true
	}
	for range 2 {
		if _, err := p.Receive(context.Background(), "raw1", func() bridge.Pending { return fallback }, build); err != nil {
			t.Fatal(err)
		}
	}
	out.waitFor(t, 1)
	if s, _ := itemState(t, db, "raw1"); s != "failed" {
		t.Fatalf("event state %s, want failed", s)
	}
	time.Sleep(20 * time.Millisecond)
	if sent := out.got(); len(sent) != 1 || sent[0] != "A:"+bridge.TextFailed {
		t.Fatalf("sent %v, want the failure sentence once", sent)
	}
}

// flakyStore fails the engine's writes of a final answer while failing is
// set, as a database locked past its busy timeout would.
type flakyStore struct {
	*store.DB
	failing atomic.Int32 // failures left
}

func (f *flakyStore) Append(ctx context.Context, sessionID int64, msgs []chat.Message, u chat.Usage, audit ...chat.AuditEntry) error {
	last := msgs[len(msgs)-1]
	if last.Role == chat.RoleAssistant && len(last.ToolCalls) == 0 && f.failing.Load() > 0 {
		f.failing.Add(-1)
		return fmt.Errorf("database is locked: %w", chat.ErrTransient)
	}
	return f.DB.Append(ctx, sessionID, msgs, u, audit...)
}

// The store fails while the answer is persisted: the turn is tried again
// in place, then the event stays pending and the person is told, truly,
// that their message is kept; a later try answers it once.
func TestPipelineKeepsMessageWhenStoreFails(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	flaky := &flakyStore{DB: env.Store}
	flaky.failing.Store(5)
	engine := chat.New(chat.Config{Logger: quiet()}, env.Model.Client(), flaky, env.Registry)
	env.Model.Fallback = "the answer"
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: env.Store, Outlet: out, RetryEvery: 30 * time.Millisecond,
		Handler: bridge.NewRouter(engine, "loadout")})
	accept(t, p, pending("ev", "A", "question"))
	sent := out.waitFor(t, 1)
	if sent[0] != "A:"+bridge.TextRetrying {
		t.Fatalf("first sentence %q", sent[0])
	}
	if s, _ := itemState(t, env.Store, "ev"); s != "pending" {
		t.Fatalf("after the failures the event is %s, want pending", s)
	}
	sent = out.waitFor(t, 2)
	chattest.Eventually(t, "the item done", func() bool { s, _ := itemState(t, env.Store, "ev"); return s == "done" })
	if len(out.got()) != 2 || sent[1] != "A:the answer" {
		t.Fatalf("sent %v, want the sentence and then the answer once", out.got())
	}
	var users int
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM messages WHERE role = 'user' AND text = 'question'").Scan(&users)
	if users != 1 {
		t.Fatalf("the question is recorded %d times, want 1", users)
	}
}

// failingInbox refuses to store answers and to finish items.
type failingInbox struct {
	*store.DB
	answer, finish atomic.Int32 // failures left
}

func (f *failingInbox) Answer(ctx context.Context, seq int64, a bridge.Answer) error {
	if f.answer.Load() > 0 {
		f.answer.Add(-1)
		return fmt.Errorf("answer: %w", chat.ErrTransient)
	}
	return f.DB.Answer(ctx, seq, a)
}

func (f *failingInbox) Finish(ctx context.Context, seq int64, s bridge.State) error {
	if f.finish.Load() > 0 {
		f.finish.Add(-1)
		return fmt.Errorf("finish: %w", chat.ErrTransient)
	}
	return f.DB.Finish(ctx, seq, s)
}

// The inbox cannot store the answer: nothing is sent and nothing marked
// done; the later try finds the answer the engine recorded and sends it
// once, without asking the model again.
func TestPipelineInboxFailureLeavesEventPending(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	inbox := &failingInbox{DB: env.Store}
	inbox.answer.Store(4) // more than one round of in-place tries
	env.Model.Text("computed once")
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: inbox, Outlet: out, RetryEvery: 30 * time.Millisecond,
		Handler: bridge.NewRouter(env.Engine, "loadout")})
	accept(t, p, pending("ev", "A", "q"))
	chattest.Eventually(t, "the answer to be refused", func() bool { return inbox.answer.Load() == 0 })
	sent := out.waitFor(t, 1)
	chattest.Eventually(t, "the item done", func() bool { s, _ := itemState(t, env.Store, "ev"); return s == "done" })
	if len(out.got()) != 1 || sent[0] != "A:computed once" {
		t.Fatalf("sent %v, want the answer once", out.got())
	}
	if n := len(env.Model.Requests()); n != 1 {
		t.Fatalf("model called %d times, want 1", n)
	}
}

func TestNotifyWaitsAndReportsFailure(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{fail: func(part string) error {
		if part == "refused" {
			return errors.New("channel_not_found")
		}
		return nil
	}}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "", nil })})
	if err := p.Notify(context.Background(), "A", []byte("A"), "hello|there"); err != nil {
		t.Fatal(err)
	}
	if sent := out.got(); !slices.Equal(sent, []string{"A:hello", "A:there"}) {
		t.Fatalf("sent %v", sent)
	}
	if err := p.Notify(context.Background(), "A", []byte("A"), "refused"); err == nil {
		t.Fatal("a refused notice reported success")
	}
}

func TestStoppedPipelineRefusesEvents(t *testing.T) {
	db, _ := openStore(t)
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: &outlet{},
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "", nil })})
	p.Stop()
	if _, err := p.Accept(context.Background(), pending("x", "A", "late")); !errors.Is(err, bridge.ErrStopped) {
		t.Fatalf("Accept after Stop = %v", err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func logger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// An answer longer than MaxReply is cut there with a note before it is
// split: a runaway answer never becomes thousands of messages.
func TestPipelineCapsLongAnswers(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	huge := strings.Repeat("é", 3000) // 6,000 bytes
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, MaxReply: 1000,
		Handler: handlerFunc(func(context.Context, chat.Inbound) (string, error) { return huge, nil })})
	accept(t, p, pending("ev1", "A", "hi"))
	got := strings.TrimPrefix(strings.Join(out.waitFor(t, 1), ""), "A:")
	if len(got) > 1000 || !strings.HasSuffix(got, bridge.TextCut) || !utf8.ValidString(got) {
		t.Fatalf("answer of %d bytes, ending %q; want at most 1,000 bytes and the cut note", len(got), got[max(0, len(got)-80):])
	}
	if !strings.HasPrefix(huge, strings.TrimSuffix(got, bridge.TextCut)) {
		t.Fatal("the kept part is not the start of the answer")
	}
}

// Sends wait for the chat's pace; another chat is not held up by it, and
// a stop while waiting leaves the part for the next start.
func TestPipelinePacesEachChat(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, ShutdownGrace: 50 * time.Millisecond,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return in.Text, nil }),
		Pacing: bridge.Pacing{PerChat: func(route any) (string, rate.Limit, int) {
			return route.(string), rate.Every(time.Hour), 1 // one send, then an hour's wait
		}}})
	accept(t, p, pending("a1", "A", "one|two"))
	out.waitFor(t, 1)
	accept(t, p, pending("b1", "B", "other"))
	got := out.waitFor(t, 2)
	if got[0] != "A:one" || got[1] != "B:other" {
		t.Fatalf("sent %q; want A's first part, then B's answer while A's second waits", got)
	}
	p.Stop()
	if state, sent := itemState(t, db, "a1"); state != "answered" || sent != 1 {
		t.Fatalf("after the stop a1 is %s with %d sent, want answered with 1", state, sent)
	}
	if n := len(out.got()); n != 2 {
		t.Fatalf("%d parts sent, want 2: the paced part waits", n)
	}
}

// lateInbox notes any use of the inbox after the pipeline's Stop returned.
type lateInbox struct {
	*store.DB
	stopped, late atomic.Bool
}

func (l *lateInbox) Prune(ctx context.Context, before time.Time) (int64, error) {
	time.Sleep(20 * time.Millisecond) // a slow disk
	if l.stopped.Load() {
		l.late.Store(true)
	}
	return l.DB.Prune(ctx, before)
}

// Stop waits for the background sweep, so the store can be closed right
// after it.
func TestStopWaitsForTheSweep(t *testing.T) {
	db, _ := openStore(t)
	inbox := &lateInbox{DB: db}
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: inbox, Outlet: &outlet{}, Logger: quiet(),
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "", nil })})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	inbox.stopped.Store(true)
	time.Sleep(60 * time.Millisecond)
	if inbox.late.Load() {
		t.Fatal("the inbox was used after Stop returned")
	}
}

// slowOutlet takes 150 ms to send a part. A part counts as arrived as soon
// as it is sent, as on a platform: cutting the request does not take it
// back.
type slowOutlet struct {
	outlet
	started chan struct{}
	arrived atomic.Int32
}

func (s *slowOutlet) Send(ctx context.Context, route any, part string) error {
	s.arrived.Add(1)
	select {
	case s.started <- struct{}{}:
	default:
	}
	select {
	case <-time.After(150 * time.Millisecond):
		return s.outlet.Send(ctx, route, part)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A part being sent when the shutdown grace runs out is let finish and
// recorded, so the next start does not send it again.
func TestPartInFlightAtGraceEndIsNotSentTwice(t *testing.T) {
	db, _ := openStore(t)
	out := &slowOutlet{started: make(chan struct{}, 1)}
	cfg := bridge.PipelineConfig{Channel: "test", Inbox: db, Outlet: out, Logger: quiet(), ShutdownGrace: 100 * time.Millisecond,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "only part", nil })}
	p := bridge.NewPipeline(cfg)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	accept(t, p, pending("1", "c1", "hi"))
	<-out.started
	p.Stop()

	p = bridge.NewPipeline(cfg)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	chattest.Eventually(t, "the event finished", func() bool { s, _ := itemState(t, db, "1"); return s == "done" })
	if n := out.arrived.Load(); n != 1 {
		t.Fatalf("the part arrived %d times", n)
	}
}

// draftOutlet is an outlet whose messages can be drafted and edited: it
// keeps every message's current text by reference.
type draftOutlet struct {
	outlet
	mu       sync.Mutex
	messages map[string]string
	order    []string
	drafts   int
	replaced int
}

func (d *draftOutlet) Draft(ctx context.Context, route any, draft []byte, text string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.messages == nil {
		d.messages = map[string]string{}
	}
	d.drafts++
	if draft == nil {
		draft = []byte(fmt.Sprintf("m%d", len(d.order)+1))
		d.order = append(d.order, string(draft))
	}
	d.messages[string(draft)] = text
	return draft, nil
}

func (d *draftOutlet) Replace(ctx context.Context, route any, draft []byte, part string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.replaced++
	d.messages[string(draft)] = "final:" + part
	return nil
}

func (d *draftOutlet) shown() (map[string]string, int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.messages), d.drafts, d.replaced
}

// A streamed answer is drafted as it grows, at once and then at most
// every DraftEvery, and its first part replaces the draft: one message,
// edited, and the rest sent after it.
func TestStreamedAnswerIsDraftedThenReplaced(t *testing.T) {
	db, _ := openStore(t)
	out := &draftOutlet{}
	grow := make(chan struct{})
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Stream: true, DraftEvery: 5 * time.Millisecond,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			in.OnText("Hel")
			<-grow
			in.OnText("Hello wor")
			time.Sleep(20 * time.Millisecond)
			in.OnText("Hello world")
			return "Hello world|second part", nil
		})})
	accept(t, p, pending("1", "c1", "hi"))
	chattest.Eventually(t, "the first draft", func() bool { m, _, _ := out.shown(); return m["m1"] == "Hel" })
	close(grow)
	out.waitFor(t, 1)
	chattest.Eventually(t, "the event finished", func() bool { s, _ := itemState(t, db, "1"); return s == "done" })
	msgs, drafts, replaced := out.shown()
	if len(msgs) != 1 || msgs["m1"] != "final:Hello world" || replaced != 1 {
		t.Fatalf("messages %v, replaced %d: want one draft turned into the first part", msgs, replaced)
	}
	if drafts < 2 {
		t.Errorf("the draft was shown %d times; the growing text was not drafted", drafts)
	}
	if got := out.got(); len(got) != 1 || !strings.HasSuffix(got[0], ":second part") {
		t.Errorf("sent %q, want only the second part sent anew", got)
	}
}

// A turn cut while its answer was being drafted leaves the draft's
// reference in the inbox; the next start replaces that draft with the
// answer instead of leaving it half-written.
func TestDraftCutByACrashIsReplacedAfterRestart(t *testing.T) {
	db, _ := openStore(t)
	out := &draftOutlet{}
	cfg := bridge.PipelineConfig{Channel: "test", Inbox: db, Outlet: out, Stream: true, DraftEvery: time.Millisecond, Logger: quiet(),
		ShutdownGrace: time.Nanosecond,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			in.OnText("half an ans")
			<-ctx.Done() // the crash comes before the answer
			return "", ctx.Err()
		})}
	p := bridge.NewPipeline(cfg)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	accept(t, p, pending("1", "c1", "hi"))
	chattest.Eventually(t, "the draft stored", func() bool {
		var d []byte
		db.Gorm().Raw("SELECT draft FROM inbox_items WHERE event_id = '1'").Row().Scan(&d)
		return string(d) == "m1"
	})
	p.Stop()

	cfg.Handler = handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "the whole answer", nil })
	cfg.Stream = false
	p = bridge.NewPipeline(cfg)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	chattest.Eventually(t, "the event finished", func() bool { s, _ := itemState(t, db, "1"); return s == "done" })
	msgs, _, _ := out.shown()
	if len(msgs) != 1 || msgs["m1"] != "final:the whole answer" || len(out.got()) != 0 {
		t.Fatalf("messages %v, sent %q: the half-written draft was not replaced", msgs, out.got())
	}
}

// A scheduled task's event (id task:…) is an unattended turn, every other
// one is not; a question's last part goes out with its hint when the
// outlet has no buttons.
func TestPipelineMarksTasksUnattendedAndAsksWithoutButtons(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	var mu sync.Mutex
	seen := map[string]bool{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out,
		Handler: replyFunc(func(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
			mu.Lock()
			seen[in.ID] = in.Unattended
			mu.Unlock()
			if in.Text == "ask" {
				return chat.Reply{Text: "Approve this?", Ask: "abc"}, nil
			}
			return chat.Reply{Text: "ok"}, nil
		})})
	task := pending("task:7:1700000000", "A", "run the report")
	task.Unattended = true
	accept(t, p, task)
	accept(t, p, pending("ev1", "A", "ask"))
	got := out.waitFor(t, 2)
	mu.Lock()
	defer mu.Unlock()
	if !seen["test:task:7:1700000000"] || seen["test:ev1"] {
		t.Fatalf("unattended = %v", seen)
	}
	if got[1] != "A:Approve this?"+bridge.AskHint(bridge.Question{ID: "abc"}) || !strings.Contains(got[1], "/approve #abc") {
		t.Fatalf("question sent as %q", got[1])
	}
}

// slowInbox lets a test hold Accept after the item is stored.
type slowInbox struct {
	bridge.Inbox
	stored, release chan struct{}
}

func (s *slowInbox) Accept(ctx context.Context, channel string, p bridge.Pending, parts []string) (bridge.Item, bool, error) {
	it, fresh, err := s.Inbox.Accept(ctx, channel, p, parts)
	if p.ID == "notice" {
		close(s.stored)
		<-s.release
	}
	return it, fresh, err
}

// Found by a CI run: an event stored while the pipeline starts is in the
// inbox Start resumes from, and was queued again when its Accept went on;
// if the first run had finished by then, it was sent twice.
func TestEventStoredDuringStartIsRunOnce(t *testing.T) {
	db, _ := openStore(t)
	in := &slowInbox{Inbox: db, stored: make(chan struct{}), release: make(chan struct{})}
	out := &outlet{}
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: in, Outlet: out, Logger: quiet(),
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "answer", nil })})
	t.Cleanup(p.Stop)
	done := make(chan error, 1)
	go func() {
		// Deliver, as Notify does: it must not wait for ever either.
		done <- p.Deliver(context.Background(), bridge.Pending{ID: "notice", Inbound: chat.Inbound{ChatKey: "A"}, Route: []byte("A"), Reply: "hello"})
	}()
	<-in.stored
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, 1) // resumed from the inbox and sent
	close(in.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The chat's next event goes after anything queued before it.
	accept(t, p, pending("next", "A", "hi"))
	if got := out.waitFor(t, 2); !slices.Equal(got, []string{"A:hello", "A:answer"}) {
		t.Fatalf("sent %q", got)
	}
}

// Two replicas on one database: an event delivered to both (a Slack
// retry that reached the other one) is taken by one only — the inbox's
// unique constraint decides, not process memory — and answered once.
func TestTwoReplicasTakeAnEventOnce(t *testing.T) {
	db1, path := openStore(t)
	db2 := reopen(t, path)
	var calls atomic.Int32
	h := handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
		calls.Add(1)
		return "answered", nil
	})
	out1, out2 := &outlet{}, &outlet{}
	p1 := newPipeline(t, bridge.PipelineConfig{Inbox: db1, Outlet: out1, Handler: h})
	p2 := newPipeline(t, bridge.PipelineConfig{Inbox: db2, Outlet: out2, Handler: h})
	fresh1, err1 := p1.Accept(context.Background(), pending("ev1", "A", "hi"))
	fresh2, err2 := p2.Accept(context.Background(), pending("ev1", "A", "hi"))
	if err1 != nil || err2 != nil || fresh1 == fresh2 {
		t.Fatalf("Accept = %v %v / %v %v: exactly one replica must take it", fresh1, err1, fresh2, err2)
	}
	taker := out1
	if fresh2 {
		taker = out2
	}
	taker.waitFor(t, 1)
	if n := calls.Load(); n != 1 || len(out1.got())+len(out2.got()) != 1 {
		t.Fatalf("answered %d times, sent %v and %v", n, out1.got(), out2.got())
	}
}

// Two processes on one database receive the messages of one chat
// interleaved (a load balancer in front of webhooks): with claims they
// are answered one at a time, in arrival order, each once, whichever
// process took each in.
func TestClaimsKeepAChatInOrderAcrossProcesses(t *testing.T) {
	db1, path := openStore(t)
	db2 := reopen(t, path)
	var mu sync.Mutex
	var order []string
	busy := false
	h := handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
		mu.Lock()
		if busy {
			t.Errorf("%q started while another turn of the chat ran", in.Text)
		}
		busy = true
		order = append(order, in.Text)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		busy = false
		mu.Unlock()
		return "re " + in.Text, nil
	})
	out := &outlet{}
	p1 := newPipeline(t, bridge.PipelineConfig{Inbox: db1, Outlet: out, Handler: h, Claim: cluster.Claim(db1, "one", time.Second, quiet())})
	p2 := newPipeline(t, bridge.PipelineConfig{Inbox: db2, Outlet: out, Handler: h, Claim: cluster.Claim(db2, "two", time.Second, quiet())})
	var want []string
	for i := range 6 {
		p := p1
		if i%2 == 1 {
			p = p2
		}
		text := fmt.Sprintf("m%d", i)
		want = append(want, text)
		accept(t, p, pending(fmt.Sprintf("ev%d", i), "A", text))
	}
	out.waitFor(t, 6)
	// Stopping runs whatever is still queued: a second answer shows now.
	p1.Stop()
	p2.Stop()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) {
		t.Fatalf("turns ran in the order %v, want %v", order, want)
	}
	if got := out.got(); len(got) != 6 {
		t.Fatalf("sent %v", got)
	}
}

// keepsClaims is a process that dies: it never gives a claim back.
type keepsClaims struct{ cluster.Store }

func (keepsClaims) ReleaseLease(context.Context, string, string) error { return nil }

// A process that dies in the middle of a chat's turn leaves its claim to
// expire; then another process resumes that turn before its own event.
func TestClaimOfADeadProcessExpiresAndItsTurnIsResumed(t *testing.T) {
	db1, path := openStore(t)
	db2 := reopen(t, path)
	var mu sync.Mutex
	var order []string
	var blocked atomic.Bool
	h := handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
		if in.Text == "m0" && blocked.CompareAndSwap(false, true) {
			<-ctx.Done() // the first process dies here
			return "", ctx.Err()
		}
		mu.Lock()
		order = append(order, in.Text)
		mu.Unlock()
		return "re " + in.Text, nil
	})
	out := &outlet{}
	p1 := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: db1, Outlet: out, Handler: h, Logger: quiet(),
		Claim: cluster.Claim(keepsClaims{db1}, "one", 500*time.Millisecond, quiet()), ShutdownGrace: time.Millisecond})
	if err := p1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	accept(t, p1, pending("ev0", "A", "m0"))
	chattest.Eventually(t, "m0 to start", blocked.Load)
	p1.Stop()
	p2 := newPipeline(t, bridge.PipelineConfig{Inbox: db2, Outlet: out, Handler: h, Claim: cluster.Claim(db2, "two", 500*time.Millisecond, quiet())})
	accept(t, p2, pending("ev1", "A", "m1"))
	if got := out.waitFor(t, 2); !slices.Equal(got, []string{"A:re m0", "A:re m1"}) {
		t.Fatalf("sent %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"m0", "m1"}) {
		t.Fatalf("order = %v", order)
	}
}

// sweepInbox lets a test hold the retry sweep's read of the inbox after
// it has read, so what it read can go stale.
type sweepInbox struct {
	bridge.Inbox
	armed         atomic.Bool
	reads         atomic.Int32
	read, release chan struct{}
}

func (s *sweepInbox) Unfinished(ctx context.Context, channel string) ([]bridge.Item, error) {
	s.reads.Add(1)
	items, err := s.Inbox.Unfinished(ctx, channel)
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-s.release
	}
	return items, err
}

// Found by a CI run on PostgreSQL: the retry sweep read an event as
// unfinished while its run was under way; the run finished before the
// sweep queued what it had read, and the event ran a second time from
// that stale copy, sending its answer twice.
func TestSweepDoesNotRunAnEventFinishedSinceItRead(t *testing.T) {
	db, _ := openStore(t)
	in := &sweepInbox{Inbox: db, read: make(chan struct{}), release: make(chan struct{})}
	out := &outlet{}
	var calls atomic.Int32
	turnStarted, finishTurn := make(chan struct{}), make(chan struct{})
	p := newPipeline(t, bridge.PipelineConfig{Inbox: in, Outlet: out, RetryEvery: 5 * time.Millisecond,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			if calls.Add(1) == 1 {
				close(turnStarted)
				<-finishTurn
			}
			return "the answer", nil
		})})
	accept(t, p, pending("ev", "A", "question"))
	<-turnStarted
	in.armed.Store(true)
	<-in.read // the sweep has read the event as pending
	close(finishTurn)
	chattest.Eventually(t, "the event done", func() bool { s, _ := itemState(t, db, "ev"); return s == "done" })
	reads := in.reads.Load()
	close(in.release)
	// The sweep's next read means it has queued what the held one read.
	chattest.Eventually(t, "the next sweep", func() bool { return in.reads.Load() > reads })
	p.Stop() // runs whatever is queued
	if n := calls.Load(); n != 1 || len(out.got()) != 1 {
		t.Fatalf("the turn ran %d times and sent %v, want once", n, out.got())
	}
}

// countingOutlet counts how often routes are read.
type countingOutlet struct {
	outlet
	reads atomic.Int32
}

func (c *countingOutlet) ReadRoute(raw []byte) (any, error) {
	c.reads.Add(1)
	return string(raw), nil
}

// An event's route is read once, however many parts its answer has:
// the channel's methods get what ReadRoute made of it.
func TestRouteIsReadOncePerEvent(t *testing.T) {
	db, _ := openStore(t)
	out := &countingOutlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "one|two|three", nil })})
	accept(t, p, pending("e1", "A", "hi"))
	if got := out.waitFor(t, 3); !slices.Equal(got, []string{"A:one", "A:two", "A:three"}) {
		t.Fatalf("sent %q", got)
	}
	if n := out.reads.Load(); n != 1 {
		t.Fatalf("the route was read %d times for one event, want 1", n)
	}
}

// Idle returns once every event taken on is answered, and not before:
// while a turn runs, it waits; with nothing to do, it returns at once.
func TestIdleWaitsForWhatWasTakenOn(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	release := make(chan struct{})
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Workers: 2,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			if in.Text == "slow" {
				<-release
			}
			return "re " + in.Text, nil
		})})
	ctx := context.Background()
	if err := p.Idle(ctx); err != nil {
		t.Fatalf("Idle with nothing taken on: %v", err)
	}
	accept(t, p, pending("e1", "c1", "slow"))
	accept(t, p, pending("e2", "c2", "quick"))
	out.waitFor(t, 1)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.Idle(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Idle while a turn runs = %v, want it to wait", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Idle(ctx) }()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.got(); len(got) != 2 {
		t.Fatalf("Idle returned with %q sent, want both answers", got)
	}
}

// The person's /cancel stops their turn running in the chat (and what
// runs under its context, such as sub-agents), and is answered that it
// did; another person's /cancel stops nothing.
func TestCancelStopsThePersonsRunningTurn(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	started := make(chan struct{}, 1)
	var stopped atomic.Bool
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
		if in.Text != "long work" {
			return "answer to " + in.Text, nil
		}
		started <- struct{}{}
		<-ctx.Done()
		stopped.Store(true)
		return "", ctx.Err()
	})})
	accept(t, p, pending("1", "c", "long work"))
	<-started
	other := pending("2", "c", "/cancel")
	other.Inbound.UserKey = "someone else"
	accept(t, p, other)
	accept(t, p, pending("3", "c", "/cancel"))
	sent := out.waitFor(t, 2)
	if !stopped.Load() {
		t.Fatal("the turn was not stopped")
	}
	if !slices.Contains(sent, "c:"+bridge.TextStopped) {
		t.Fatalf("sent %q, want the person's /cancel answered %q", sent, bridge.TextStopped)
	}
	if !slices.Contains(sent, "c:answer to /cancel") {
		t.Fatalf("sent %q: another person's /cancel must be handled as their own message", sent)
	}
}

// /status while a turn runs in the chat is answered at once, not after
// the turn: what it shows is of now.
func TestStatusAnswersWhileATurnRuns(t *testing.T) {
	db, _ := openStore(t)
	out := &outlet{}
	started, release := make(chan struct{}), make(chan struct{})
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
		if in.Text == "/status" {
			return "status: busy", nil
		}
		close(started)
		<-release
		return "finished", nil
	})})
	accept(t, p, pending("1", "c", "long work"))
	<-started
	accept(t, p, pending("2", "c", "/status"))
	if sent := out.waitFor(t, 1); sent[0] != "c:status: busy" {
		t.Fatalf("sent %q before the turn finished", sent)
	}
	close(release)
	if sent := out.waitFor(t, 2); sent[1] != "c:finished" {
		t.Fatalf("sent %q", sent)
	}
}

// A stop that cuts a chat's claim while it is taken is not a failure: it
// logs no error, and the event is left for the next start.
func TestAStopWhileClaimingIsNotAFailure(t *testing.T) {
	db, _ := openStore(t)
	var logs chattest.LogBuffer
	claiming := make(chan struct{})
	var once sync.Once
	claim := func(ctx context.Context, name string, run func(context.Context) error) (bool, error) {
		once.Do(func() { close(claiming) })
		<-ctx.Done()
		return false, ctx.Err()
	}
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: db, Outlet: &outlet{}, Logger: logger(&logs),
		Handler: handlerFunc(func(context.Context, chat.Inbound) (string, error) { return "re", nil }),
		Claim:   claim, ShutdownGrace: time.Millisecond})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	accept(t, p, pending("ev1", "A", "hi"))
	select {
	case <-claiming:
	case <-time.After(10 * time.Second):
		t.Fatal("the chat was never claimed")
	}
	p.Stop()
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the stop was logged as a failure:\n%s", logs.String())
	}
	items, err := db.Unfinished(context.Background(), "test")
	if err != nil || len(items) != 1 {
		t.Errorf("the event was not left for the next start: %d items, %v", len(items), err)
	}
}

// stopsWhileReading is an inbox whose first read of the unfinished
// events comes as the process stops.
type stopsWhileReading struct {
	bridge.Inbox
	stop context.CancelFunc
}

func (s stopsWhileReading) Unfinished(ctx context.Context, channel string) ([]bridge.Item, error) {
	s.stop()
	return nil, ctx.Err()
}

// Found by probing: a serve stopped while a channel's pipeline started
// logged "delivery: cannot read the inbox; retrying: context canceled".
// Start returns the stop's error and logs nothing.
func TestAStopWhileStartingIsNotAFailure(t *testing.T) {
	db, _ := openStore(t)
	var logs chattest.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: stopsWhileReading{db, cancel}, Outlet: &outlet{}, Logger: logger(&logs),
		Handler: handlerFunc(func(context.Context, chat.Inbound) (string, error) { return "re", nil })})
	if err := p.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Start = %v, want the stop's error", err)
	}
	p.Stop()
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the stop was logged as a failure:\n%s", logs.String())
	}
}
