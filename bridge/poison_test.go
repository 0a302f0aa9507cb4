package bridge_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store"
)

// TestMain lets a test run this binary as a process that crashes.
func TestMain(m *testing.M) {
	if db := os.Getenv("LOADOUT_TEST_JOURNAL_DB"); db != "" {
		die, _ := strconv.ParseBool(os.Getenv("LOADOUT_TEST_JOURNAL_DIE"))
		os.Exit(journalProcess(db, os.Getenv("LOADOUT_TEST_POISON_SENT"), os.Getenv("LOADOUT_TEST_JOURNAL"), die, strings.Fields(os.Getenv("LOADOUT_TEST_POISON_SEND"))))
	}
	if db := os.Getenv("LOADOUT_TEST_REPLICA_DB"); db != "" {
		os.Exit(replicaProcess(db, os.Getenv("LOADOUT_TEST_POISON_SENT"), os.Getenv("LOADOUT_TEST_REPLICA_JOURNAL")))
	}
	if db := os.Getenv("LOADOUT_TEST_ASKER_DB"); db != "" {
		claims, _ := strconv.ParseBool(os.Getenv("LOADOUT_TEST_ASKER_CLAIMS"))
		os.Exit(askerProcess(db, os.Getenv("LOADOUT_TEST_POISON_SENT"), claims))
	}
	if db := os.Getenv("LOADOUT_TEST_POISON_DB"); db != "" {
		os.Exit(poisonProcess(db, os.Getenv("LOADOUT_TEST_POISON_SENT"), strings.Fields(os.Getenv("LOADOUT_TEST_POISON_SEND"))))
	}
	os.Exit(m.Run())
}

// fileOutlet appends what it sends to a file, so the test sees it
// across the processes it runs.
type fileOutlet struct{ path string }

func (o fileOutlet) Split(text string) []string        { return []string{text} }
func (o fileOutlet) ReadRoute(raw []byte) (any, error) { return string(raw), nil }
func (o fileOutlet) Send(_ context.Context, _ any, text string) error {
	f, err := os.OpenFile(o.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s\n", text)
	return err
}

// crasher answers every message, except "boom": that one ends the whole
// process from a goroutine, as a runtime fatal error or an out-of-memory
// kill would — nothing can recover it.
type crasher struct{}

func (crasher) Handle(_ context.Context, in chat.Inbound) (chat.Reply, error) {
	if in.Text == "boom" {
		go func() { panic("the process ends here") }()
		select {}
	}
	return chat.Reply{Text: "ok: " + in.Text}, nil
}

// poisonProcess is one life of the service: it resumes what the inbox
// holds, takes in send, and exits once nothing is left.
func poisonProcess(db, sent string, send []string) int {
	st, err := store.OpenTest(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: st, Handler: crasher{}, Outlet: fileOutlet{sent},
		Workers: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// Every message is stored before any turn runs (and ends the
	// process).
	for i, text := range send {
		if _, err := p.Accept(ctx, bridge.Pending{ID: fmt.Sprint("update:", i), Inbound: chat.Inbound{ChatKey: "test:1", UserKey: "test:1", Text: text}, Route: []byte("r")}); err != nil {
			return 1
		}
	}
	if err := p.Start(ctx); err != nil {
		return 1
	}
	for range 500 {
		items, err := st.Unfinished(ctx, "test")
		if err == nil && len(items) == 0 {
			p.Stop()
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 1
}

// Found by probing: a message whose handling ends the process (a
// hostile PDF) ran again at every restart and ended it again: under
// Restart=always, down for good. Each turn's start is recorded before it
// runs; a message whose turn started delivery.max_attempts (3) times and
// never came back is set aside, its person told once with its reference,
// and the chat's next message is answered.
func TestPoisonMessageIsQuarantinedAfterThreeCrashes(t *testing.T) {
	dir := t.TempDir()
	db, sent := filepath.Join(dir, "loadout.db"), filepath.Join(dir, "sent.txt")
	run := func(send string) int {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LOADOUT_TEST_POISON_DB="+db, "LOADOUT_TEST_POISON_SENT="+sent, "LOADOUT_TEST_POISON_SEND="+send)
		cmd.Run()
		return cmd.ProcessState.ExitCode()
	}
	// The message arrives; the process dies under it, and at each of the
	// next two restarts.
	for i, send := range []string{"boom hello", "", ""} {
		if code := run(send); code == 0 {
			t.Fatalf("life %d ended well: the crash did not happen", i+1)
		}
	}
	b, _ := os.ReadFile(sent)
	if len(b) != 0 {
		t.Fatalf("sent before the quarantine: %q", b)
	}
	// The fourth start sets it aside and answers the next message.
	if code := run(""); code != 0 {
		t.Fatalf("the fourth life exited %d", code)
	}
	b, _ = os.ReadFile(sent)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != fmt.Sprintf(bridge.TextQuarantined, "test:update:0") || lines[1] != "ok: hello" {
		t.Fatalf("sent %q", lines)
	}
	// A fifth life has nothing left to do, and says nothing again.
	if code := run(""); code != 0 {
		t.Fatalf("the fifth life exited %d", code)
	}
	if b2, _ := os.ReadFile(sent); string(b2) != string(b) {
		t.Fatalf("more was sent: %q", b2)
	}
}

// dyingInbox is a store that dies, with the process, as it is about to
// record that an item was answered and sent: the moment after the
// platform took the answer.
type dyingInbox struct{ *store.DB }

func (d dyingInbox) Finish(ctx context.Context, seq int64, state bridge.State) error {
	if state == bridge.StateDone {
		os.Exit(2)
	}
	return d.DB.Finish(ctx, seq, state)
}

// journalProcess is one life of a service that dies (when die is set)
// right after its answer went out, with the journal at journal ("" for
// none).
func journalProcess(db, sent, journal string, die bool, send []string) int {
	st, err := store.OpenTest(db)
	if err != nil {
		return 1
	}
	var inbox bridge.Inbox = st
	if die {
		inbox = dyingInbox{st}
	}
	var j *bridge.FileJournal
	if journal != "" {
		if j, err = bridge.OpenJournal(journal); err != nil {
			return 1
		}
	}
	ctx := context.Background()
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: inbox, Handler: crasher{}, Outlet: fileOutlet{sent},
		Journal: j, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for i, text := range send {
		if _, err := p.Accept(ctx, bridge.Pending{ID: fmt.Sprint("update:", i), Inbound: chat.Inbound{ChatKey: "test:1", UserKey: "test:1", Text: text}, Route: []byte("r")}); err != nil {
			return 1
		}
	}
	if err := p.Start(ctx); err != nil {
		return 1
	}
	for range 500 {
		if items, err := st.Unfinished(ctx, "test"); err == nil && len(items) == 0 {
			p.Stop()
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 1
}

// A process killed after the platform took an answer and before the
// inbox could record it sent the answer again at the next start. The
// journal records the send with one write the moment the platform
// answers: the next start finds it and sends nothing again. (Without the
// journal, the test shows the double it prevents.)
func TestAnswerTakenThenKilledIsNotSentAgain(t *testing.T) {
	for _, withJournal := range []bool{true, false} {
		dir := t.TempDir()
		db, sent, journal := filepath.Join(dir, "loadout.db"), filepath.Join(dir, "sent.txt"), ""
		if withJournal {
			journal = filepath.Join(dir, "sent.journal")
		}
		run := func(die bool, send string) int {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "LOADOUT_TEST_JOURNAL_DB="+db, "LOADOUT_TEST_POISON_SENT="+sent,
				"LOADOUT_TEST_JOURNAL="+journal, "LOADOUT_TEST_JOURNAL_DIE="+strconv.FormatBool(die), "LOADOUT_TEST_POISON_SEND="+send)
			cmd.Run()
			return cmd.ProcessState.ExitCode()
		}
		if code := run(true, "hello"); code != 2 {
			t.Fatalf("the first life exited %d, not at the record", code)
		}
		if code := run(false, ""); code != 0 {
			t.Fatalf("the second life exited %d", code)
		}
		b, _ := os.ReadFile(sent)
		got := strings.Count(string(b), "ok: hello")
		if withJournal && got != 1 {
			t.Errorf("with the journal the answer arrived %d times", got)
		}
		if !withJournal && got != 2 {
			t.Errorf("without the journal the answer arrived %d times; the test no longer shows the window", got)
		}
	}
}

// deadOnce stores an event as a process that died under its turn leaves
// it: pending, with starts of its turn that never came back.
func deadOnce(t *testing.T, db *store.DB, id, chatKey string, all, alone int) {
	t.Helper()
	if _, _, err := db.Accept(context.Background(), "test", pending(id, chatKey, "hello"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm().Exec("UPDATE inbox_items SET starts = ?, alone_starts = ? WHERE event_id = ?", all, alone, id).Error; err != nil {
		t.Fatal(err)
	}
}

// A turn that was in flight when its process ended runs again alone: it
// waits out the process's settling time, no other turn runs beside it,
// and its start is recorded as a lone one.
func TestTurnInFlightAtADeathRunsAlone(t *testing.T) {
	db, _ := openStore(t)
	deadOnce(t, db, "ev-a", "A", 1, 0)
	release := make(chan struct{})
	var running, most atomic.Int32
	var ranB atomic.Bool
	h := handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if in.ChatKey == "A" {
			<-release
		} else {
			ranB.Store(true)
		}
		return "ok", nil
	})
	const settle = 150 * time.Millisecond
	began := time.Now()
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Handler: h, Gate: bridge.NewGate(settle)})
	chattest.Eventually(t, "the lone turn to start", func() bool { return running.Load() == 1 })
	if took := time.Since(began); took < settle {
		t.Fatalf("the lone turn started %v after the pipeline, before the process settled (%v)", took, settle)
	}
	accept(t, p, pending("ev-b", "B", "hi"))
	// B may not start while A runs alone; once A is done, it runs.
	time.Sleep(100 * time.Millisecond)
	if ranB.Load() {
		t.Fatal("another chat's turn ran beside the lone one")
	}
	close(release)
	out.waitFor(t, 2)
	if m := most.Load(); m != 1 {
		t.Fatalf("%d turns ran at once", m)
	}
	var all, alone int
	db.Gorm().Raw("SELECT starts, alone_starts FROM inbox_items WHERE event_id = 'ev-a'").Row().Scan(&all, &alone)
	if all != 2 || alone != 1 {
		t.Fatalf("starts %d (alone %d), want 2 (alone 1)", all, alone)
	}
}

// Only ends that came while a turn ran alone are held against it past
// the first: a message in flight at many ends beside others is run
// again, one whose last two lone runs ended the process is set aside.
func TestOnlyLoneDeathsQuarantine(t *testing.T) {
	db, _ := openStore(t)
	deadOnce(t, db, "innocent", "A", 5, 1)
	deadOnce(t, db, "poison", "B", 3, 2)
	out := &outlet{}
	newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Gate: bridge.NewGate(-1),
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) { return "answered", nil })})
	got := out.waitFor(t, 2)
	slices.Sort(got)
	if want := []string{"A:answered", "B:" + fmt.Sprintf(bridge.TextQuarantined, "test:poison")}; !slices.Equal(got, want) {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

// partsOutlet is a fileOutlet whose answers split at "|".
type partsOutlet struct{ fileOutlet }

func (partsOutlet) Split(text string) []string { return strings.Split(text, "|") }

// dyingJournal ends the process the moment its first write is done:
// right after the platform took a part and the journal kept it.
type dyingJournal struct{ bridge.Journal }

func (d dyingJournal) Sent(ctx context.Context, seq int64, n int, done bool) (bool, error) {
	d.Journal.Sent(ctx, seq, n, done)
	os.Exit(2)
	return false, nil
}

// replicaProcess is one of several processes sharing a PostgreSQL
// store: it holds the chat of the one message it takes in, answers it in
// two parts and dies right after the platform took the first, with its
// journal kept as kind says ("store" or "file", beside the sent file).
func replicaProcess(db, sent, kind string) int {
	st, err := store.OpenTest(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var j bridge.Journal = bridge.InboxJournal(st)
	if kind == "file" {
		if j, err = bridge.OpenJournal(sent + ".journal"); err != nil {
			return 1
		}
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: st, Outlet: partsOutlet{fileOutlet{sent}}, Journal: dyingJournal{j},
		Handler: handlerFunc(func(context.Context, chat.Inbound) (string, error) { return "part one|part two", nil }),
		Claim:   cluster.Claim(st, "one", 300*time.Millisecond, log), Logger: log})
	if _, err := p.Accept(ctx, pending("ev", "A", "hello")); err != nil {
		return 1
	}
	if err := p.Start(ctx); err != nil {
		return 1
	}
	time.Sleep(10 * time.Second)
	return 1 // it should have died
}

// Found by reading: with several processes on PostgreSQL, the journal of
// sent parts was a file of each process's own, so when one died right
// after the platform took a part, the process that took the chat over
// could not see it and sent the part again. Where the store is shared,
// the journal is the store. (With a file, the test shows the double it
// prevents.)
func TestPartTakenThenKilledIsNotSentAgainByAnotherProcessOnPostgres(t *testing.T) {
	if os.Getenv(store.TestDSNVar) == "" {
		t.Skip("needs PostgreSQL: set " + store.TestDSNVar + " (.ci/run does)")
	}
	for _, kind := range []string{"store", "file"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			db, sent := filepath.Join(dir, "loadout.db"), filepath.Join(dir, "sent.txt")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "LOADOUT_TEST_REPLICA_DB="+db, "LOADOUT_TEST_POISON_SENT="+sent, "LOADOUT_TEST_REPLICA_JOURNAL="+kind)
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("the first process exited %d, not right after the part went out", code)
			}
			// The other process takes the chat over once the dead one's
			// claim runs out.
			st := reopen(t, db)
			log := quiet()
			p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: st, Outlet: partsOutlet{fileOutlet{sent}},
				Journal: bridge.InboxJournal(st), Handler: handlerFunc(func(context.Context, chat.Inbound) (string, error) { return "again", nil }),
				Claim: cluster.Claim(st, "two", 300*time.Millisecond, log), Logger: log})
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			chattest.Eventually(t, "the event done", func() bool {
				items, err := st.Unfinished(context.Background(), "test")
				return err == nil && len(items) == 0
			})
			b, _ := os.ReadFile(sent)
			got := strings.Split(strings.TrimSpace(string(b)), "\n")
			switch {
			case kind == "store" && !slices.Equal(got, []string{"part one", "part two"}):
				t.Fatalf("sent %q, want each part once", got)
			case kind == "file" && !slices.Equal(got, []string{"part one", "part one", "part two"}):
				t.Fatalf("with a file journal sent %q; the test no longer shows the double", got)
			}
		})
	}
}
