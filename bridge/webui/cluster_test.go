package webui_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/webui"
	"loadout/bridge/webui/webuitest"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store"
	"loadout/store/storetest"
	"loadout/tools/files"
)

// replica is one process of two serving the browser chat on one
// database.
func replica(t *testing.T, auth *webuitest.Auth, env *storetest.Env, ws *files.Workspaces, name string) *server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return startServer(t, auth, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store,
		Delivery: bridge.Delivery{Files: ws, ShutdownGrace: time.Nanosecond, Claim: cluster.Claim(env.Store, name, time.Second, quiet)}}, webui.Config{})
}

// Found by measuring two replicas: a page open on one process stayed on
// "working" while the other answered, its stream being in the memory
// of the process that ran the turn. Now each process tells the others
// what it shows, through the store's notices: Ana's page on the second
// process shows the working sign come and go, the draft and the answer
// of a turn the first ran, within a second of the first process's own
// page, and another person's page there shows none of it; a stream that
// reconnects there with Last-Event-ID gets what was kept meanwhile, each
// part once.
func TestAPageOnAnotherProcessStreamsTheAnswerOnPostgres(t *testing.T) {
	if os.Getenv(store.TestDSNVar) == "" {
		t.Skip("needs PostgreSQL: set " + store.TestDSNVar + " (.ci/run does)")
	}
	model := chattest.NewModelServer(t)
	one := storetest.NewEnv(t, storetest.Options{Model: model})
	two := storetest.NewEnv(t, storetest.Options{Model: model, DBPath: one.DBPath})
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	auth := webuitest.NewAuth()
	first, second := replica(t, auth, one, ws, "one"), replica(t, auth, two, ws, "two")
	here := webuitest.NewPerson(auth, "telegram:42")
	t.Cleanup(here.Close)
	there := webuitest.NewPerson(auth, "telegram:42")
	there.Cookie, there.CSRF = here.Cookie, here.CSRF
	t.Cleanup(there.Close)
	here.Connect(t, first.URL)
	there.Connect(t, second.URL)
	ben := webuitest.NewPerson(auth, "slack:T1:U2")
	t.Cleanup(ben.Close)
	ben.Connect(t, second.URL)

	model.Push(chattest.Step{Chunks: []string{"Streamed ", "from ", "the first."}, ChunkDelay: 150 * time.Millisecond})
	here.Send(t, first.URL, "hello", nil)
	seen := make(chan time.Time, 2)
	for _, p := range []*webuitest.Person{here, there} {
		go func() {
			deadline := time.Now().Add(10 * time.Second)
			for !slices.Equal(p.Answers(), []string{"Streamed from the first."}) || !stoppedWorking(p) {
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			seen <- time.Now()
		}()
	}
	a, b := <-seen, <-seen
	if !slices.Equal(there.Answers(), []string{"Streamed from the first."}) || !stoppedWorking(there) {
		t.Fatalf("the page on the other process shows %+v", there.Events())
	}
	if d := b.Sub(a); d > time.Second {
		t.Fatalf("the page on the other process showed the answer %s after the first's", d)
	}
	var kinds []string
	for _, e := range there.Events() {
		kinds = append(kinds, e.Kind)
	}
	if !slices.Contains(kinds, "you") || !slices.Contains(kinds, "draft") {
		t.Fatalf("the page on the other process showed %q", kinds)
	}
	// What the second process heard of Ana's chat went to her page
	// only: Ben's page there shows nothing of it.
	if slices.ContainsFunc(ben.Events(), func(e webuitest.Event) bool { return e.Kind != "working" || e.On }) {
		t.Fatalf("Ben's page shows %+v", ben.Events())
	}

	there.Close()
	model.Text("Second.")
	model.Text("Third.")
	here.Send(t, first.URL, "two", nil)
	waitFor(t, "the second answer", hasAnswers(here, "Streamed from the first.", "Second."))
	here.Send(t, second.URL, "three", nil)
	waitFor(t, "the third answer", hasAnswers(here, "Streamed from the first.", "Second.", "Third."))
	there.Connect(t, second.URL)
	waitFor(t, "the answers sent while away", hasAnswers(there, "Streamed from the first.", "Second.", "Third."))
	ids := map[int64]bool{}
	for _, e := range there.Events() {
		if e.ID != 0 && ids[e.ID] {
			t.Fatalf("event %d shown twice: %+v", e.ID, there.Events())
		}
		ids[e.ID] = true
	}
}

// stoppedWorking reports whether p's page showed the working sign and
// then its end.
func stoppedWorking(p *webuitest.Person) bool {
	var on []bool
	for _, e := range p.Events() {
		if e.Kind == "working" {
			on = append(on, e.On)
		}
	}
	return slices.Contains(on, true) && !on[len(on)-1]
}

// BenchmarkMessageStatementsOnPostgres counts, with pg_stat_statements
// loaded on the server, the statements PostgreSQL runs for one message
// of the browser chat (sent, answered, shown), in all and those that
// tell other processes (pg_notify) or keep the page's states (history,
// working sign).
//
//	LOADOUT_TEST_DSN=postgres://… go test -tags sqlite_fts5 -run '^$' -bench MessageStatements -benchtime 100x ./bridge/webui/
func BenchmarkMessageStatementsOnPostgres(b *testing.B) {
	if os.Getenv(store.TestDSNVar) == "" {
		b.Skip("needs PostgreSQL: set " + store.TestDSNVar)
	}
	env := storetest.NewEnv(b, storetest.Options{})
	ws, err := files.New(files.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	auth := webuitest.NewAuth()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := startServer(b, auth, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store,
		Delivery: bridge.Delivery{Files: ws, ShutdownGrace: time.Nanosecond, Claim: cluster.Claim(env.Store, "one", 15*time.Second, quiet)}}, webui.Config{})
	ana := webuitest.NewPerson(auth, "telegram:42")
	b.Cleanup(ana.Close)
	ana.Connect(b, srv.URL)
	count := func(like string) float64 {
		var n float64
		if env.Store.Gorm().Raw("SELECT coalesce(sum(calls), 0) FROM public.pg_stat_statements WHERE query LIKE ?", like).Scan(&n).Error != nil {
			return -1
		}
		return n
	}
	kinds := []string{"%", "%pg_notify%", "%states%"}
	var before []float64
	for _, k := range kinds {
		before = append(before, count(k))
	}
	n := 0
	for b.Loop() {
		n++
		env.Model.Text(fmt.Sprint("Answer ", n, "."))
		ana.Send(b, srv.URL, fmt.Sprint("message ", n), nil)
		deadline := time.Now().Add(10 * time.Second)
		for !stoppedAfter(ana, fmt.Sprint("Answer ", n, ".")) {
			if time.Now().After(deadline) {
				b.Fatalf("no answer %d", n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i, unit := range []string{"stmts/msg", "notify/msg", "states/msg"} {
		if after := count(kinds[i]); after >= 0 && before[i] >= 0 {
			b.ReportMetric((after-before[i])/float64(n), unit)
		}
	}
}

// stoppedAfter reports whether p's page shows answer as its last answer
// and the working sign off after it.
func stoppedAfter(p *webuitest.Person, answer string) bool {
	ans := p.Answers()
	if len(ans) == 0 || ans[len(ans)-1] != answer {
		return false
	}
	ev := p.Events()
	for i := len(ev) - 1; i >= 0; i-- {
		if ev[i].Kind == "working" {
			return !ev[i].On
		}
	}
	return false
}
