package bridge_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store"
)

func onPostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(store.TestDSNVar) == "" {
		t.Skip("needs PostgreSQL: set " + store.TestDSNVar + " (.ci/run does)")
	}
}

// unheard is a store whose notices are lost: what a process sees while
// its connection to the database is down.
type unheard struct{ *store.DB }

func (unheard) Signal(context.Context, string, string) error { return nil }
func (unheard) Listen(context.Context, string, func(string)) {}

var questionCode = regexp.MustCompile(`Question (#[a-z0-9]{4})`)

// codeIn is the code of the question in part.
func codeIn(t *testing.T, part string) string {
	t.Helper()
	m := questionCode.FindStringSubmatch(part)
	if m == nil {
		t.Fatalf("no question code in %q", part)
	}
	return m[1]
}

// Found by measuring two replicas: a question a turn asked on one
// process could not be answered through the other, which kept its
// answer as a message waiting behind the turn. Now the question is in
// the store, and the other process takes the answer (a press's
// "/answer <code> <n>" here, checked there first), records it and tells
// the turn; another person's message through it still waits its turn,
// and a /clear through it cancels the question. Without notices (lost
// with a connection) the turn finds the answer by reading the store
// every QuestionPoll.
func TestQuestionAnsweredThroughAnotherProcessOnPostgres(t *testing.T) {
	onPostgres(t)
	for _, notices := range []bool{true, false} {
		name := "notices"
		if !notices {
			name = "polling"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db1, path := openStore(t)
			db2 := reopen(t, path)
			var in1, in2 bridge.Inbox = db1, db2
			if !notices {
				in1, in2 = unheard{db1}, unheard{db2}
			}
			out := &outlet{}
			p1 := newPipeline(t, bridge.PipelineConfig{Inbox: in1, Outlet: out, Handler: askOnce(time.Minute),
				Claim: cluster.Claim(db1, "one", time.Second, quiet()), QuestionPoll: 100 * time.Millisecond})
			p2 := newPipeline(t, bridge.PipelineConfig{Inbox: in2, Outlet: out, Handler: askOnce(time.Minute),
				Claim: cluster.Claim(db2, "two", time.Second, quiet()), QuestionPoll: 100 * time.Millisecond})
			accept(t, p1, from("e1", "ana", "ask"))
			code := codeIn(t, out.waitFor(t, 1)[0])
			accept(t, p2, from("e2", "bea", "2"))
			if !p2.Asks(ctx, "c1", "ana", code) || p2.Asks(ctx, "c1", "bea", code) || p2.Asks(ctx, "c1", "ana", "#zzzz") {
				t.Fatal("the other process's check of a press does not see the question as it is")
			}
			accept(t, p2, from("e3", "ana", "/answer "+code+" 2"))
			sent := out.waitFor(t, 3)
			if sent[1] != "c1:got green" || sent[2] != "c1:turn for bea: 2" {
				t.Fatalf("sent = %q", sent)
			}
			if st, _ := itemState(t, db1, "e3"); st != string(bridge.StateDone) {
				t.Fatalf("the answer's event is %s", st)
			}
			accept(t, p1, from("e4", "ana", "ask"))
			out.waitFor(t, 4)
			accept(t, p2, from("e5", "bea", "/clear"))
			if sent := out.waitFor(t, 6); sent[4] != "c1:cancelled" || sent[5] != "c1:turn for bea: /clear" {
				t.Fatalf("sent = %q", sent)
			}
		})
	}
}

// dyingOutlet writes what it sends to a file, and ends its process once
// it has sent a question: a process that dies while its turn waits for
// the answer.
type dyingOutlet struct{ fileOutlet }

func (o dyingOutlet) Send(ctx context.Context, route any, text string) error {
	err := o.fileOutlet.Send(ctx, route, text)
	if strings.Contains(text, "Question #") {
		os.Exit(2)
	}
	return err
}

// askerProcess is a process whose turn asks a question and which dies
// once the question is sent; with claims, as one of several processes
// sharing the store.
func askerProcess(db, sent string, claims bool) int {
	st, err := store.OpenTest(db)
	if err != nil {
		return 1
	}
	ctx := context.Background()
	log := quiet()
	var claim bridge.Claim
	if claims {
		claim = cluster.Claim(st, "dying", 300*time.Millisecond, log)
	}
	p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "test", Inbox: st, Outlet: dyingOutlet{fileOutlet{sent}}, Handler: askOnce(time.Minute),
		Claim: claim, Logger: log})
	if err := p.Start(ctx); err != nil {
		return 1
	}
	if _, err := p.Accept(ctx, from("e1", "ana", "ask")); err != nil {
		return 1
	}
	time.Sleep(10 * time.Second)
	return 1 // it should have died
}

// An answer that comes after the process whose turn asked died is kept
// for the turn, which another process resumes as a restart does (from
// what was recorded): its run asks the same question, and takes the
// answer instead of asking again. The person is told plainly what
// happened.
func TestAnswerAfterTheAskerDiedResumesTheTurnOnPostgres(t *testing.T) {
	onPostgres(t)
	dir := t.TempDir()
	db, sent := filepath.Join(dir, "loadout.db"), filepath.Join(dir, "sent.txt")
	st := reopen(t, db)
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: st, Outlet: out, Handler: askOnce(time.Minute),
		Claim: cluster.Claim(st, "alive", 300*time.Millisecond, quiet()), QuestionPoll: 50 * time.Millisecond})
	askAndDie(t, db, sent, true)
	chattest.Eventually(t, "the dead process's claim on the chat to run out", func() bool {
		var n int64
		st.Gorm().Raw("SELECT count(*) FROM leases WHERE name = 'chat:test:c1' AND expires_at > ?", time.Now().UnixMilli()).Scan(&n)
		return n == 0
	})
	accept(t, p, from("e2", "ana", "2"))
	got := out.waitFor(t, 2)
	if !strings.Contains(got[0], "cut short by a restart") || !strings.Contains(got[0], "if it asks the same question, your answer is used") {
		t.Fatalf("the person was told %q", got[0])
	}
	if got[1] != "c1:got green" {
		t.Fatalf("sent = %q", got)
	}
	if slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "Colour?") }) {
		t.Fatalf("the question was asked again: %q", got)
	}
	chattest.Eventually(t, "both events done", func() bool {
		items, err := st.Unfinished(context.Background(), "test")
		return err == nil && len(items) == 0
	})
}

// askAndDie runs a process on the store at db whose turn asks a
// question and which dies once it is sent (to sent).
func askAndDie(t *testing.T, db, sent string, claims bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOADOUT_TEST_ASKER_DB="+db, "LOADOUT_TEST_POISON_SENT="+sent, fmt.Sprint("LOADOUT_TEST_ASKER_CLAIMS=", claims))
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("the asking process exited %d, not once its question was sent", code)
	}
	if b, _ := os.ReadFile(sent); !strings.Contains(string(b), "Colour?") {
		t.Fatalf("the asking process sent %q", b)
	}
}

// held is a handler whose turn waits, before it runs, until release is
// closed.
func held(h bridge.Handler, release chan struct{}) bridge.Handler {
	return replyFunc(func(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return chat.Reply{}, ctx.Err()
		}
		return h.Handle(ctx, in)
	})
}

// One process serving the store (no claims) dies while its turn waits
// for an answer. After the restart the turn is resumed; the answer that
// comes before the resumed run asks again is kept for it, the person is
// told so, and the run takes it instead of asking again.
func TestAnswerAfterARestartResumesTheTurn(t *testing.T) {
	dir := t.TempDir()
	db, sent := filepath.Join(dir, "loadout.db"), filepath.Join(dir, "sent.txt")
	reopen(t, db) // made (a schema of its own on PostgreSQL) before the child
	askAndDie(t, db, sent, false)
	st := reopen(t, db)
	out := &outlet{}
	release := make(chan struct{})
	p := newPipeline(t, bridge.PipelineConfig{Inbox: st, Outlet: out, Handler: held(askOnce(time.Minute), release)})
	accept(t, p, from("e2", "ana", "2"))
	got := out.waitFor(t, 1)
	if !strings.Contains(got[0], "cut short by a restart") {
		t.Fatalf("the person was told %q", got[0])
	}
	close(release)
	got = out.waitFor(t, 2)
	if got[1] != "c1:got green" || len(got) != 2 {
		t.Fatalf("sent = %q", got)
	}
	if st, _ := itemState(t, st, "e2"); st != string(bridge.StateDone) {
		t.Fatalf("the answer's event is %s", st)
	}
}
