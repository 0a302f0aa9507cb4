package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/cluster"
	"loadout/store"
	"loadout/tools"
)

// askedOutlet hands on each question and each answer it sends.
type askedOutlet struct{ questions, answers chan string }

func (o askedOutlet) Split(text string) []string        { return []string{text} }
func (o askedOutlet) ReadRoute(raw []byte) (any, error) { return string(raw), nil }
func (o askedOutlet) Send(_ context.Context, _ any, part string) error {
	if strings.Contains(part, "Question #") {
		o.questions <- part
	} else {
		o.answers <- part
	}
	return nil
}

// BenchmarkAnswerAcrossProcesses measures, on PostgreSQL, how long the
// answer to a question takes to reach the turn that asked it when the
// answer is taken in by another process: from the moment the other
// process is handed the answer (it stores it, finds the chat claimed,
// finds the question, records the answer and signals it) until the
// asking turn's Ask returns on the first. "notices" is the path as
// built (LISTEN/NOTIFY); "polling" is the same with every notice lost,
// left to the turn's reading of the store every QuestionPoll (1s). It
// reports the median and the 99th percentile, and with
// pg_stat_statements loaded on the server, the statements the database
// ran per answer (both processes, the question and the turn included).
//
//	LOADOUT_TEST_DSN=postgres://… go test -tags sqlite_fts5 -run '^$' -bench AnswerAcrossProcesses -benchtime 200x ./bridge/
func BenchmarkAnswerAcrossProcesses(b *testing.B) {
	onPostgres(b)
	for _, mode := range []string{"notices", "polling"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "loadout.db")
			open := func() *store.DB {
				db, err := store.OpenTest(path)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				return db
			}
			db1, db2 := open(), open()
			var in1, in2 bridge.Inbox = db1, db2
			if mode == "polling" {
				in1, in2 = unheard{db1}, unheard{db2}
			}
			out := askedOutlet{questions: make(chan string, 1), answers: make(chan string, 1)}
			returned := make(chan time.Time, 1)
			asker := replyFunc(func(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
				a, ok := tools.AskerFrom(ctx)
				if !ok || in.Text != "ask" {
					return chat.Reply{Text: "not asked: " + in.Text}, nil
				}
				ans, err := a.Ask(ctx, tools.Question{Text: "Go on?", Choices: []string{"Yes", "No"}})
				returned <- time.Now()
				return chat.Reply{Text: "got " + ans}, err
			})
			start := func(in bridge.Inbox, db *store.DB, name string) *bridge.Pipeline {
				p := bridge.NewPipeline(bridge.PipelineConfig{Channel: "bench", Inbox: in, Outlet: out, Handler: asker,
					Claim: cluster.Claim(db, name, 15*time.Second, quiet()), Logger: quiet()})
				if err := p.Start(ctx); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(p.Stop)
				return p
			}
			p1, p2 := start(in1, db1, "one"), start(in2, db2, "two")
			statements := func() float64 {
				var n float64
				if db1.Gorm().Raw("SELECT coalesce(sum(calls), 0) FROM public.pg_stat_statements").Scan(&n).Error != nil {
					return -1
				}
				return n
			}
			var took []time.Duration
			before := statements()
			i := 0
			for b.Loop() {
				i++
				if _, err := p1.Accept(ctx, pending(fmt.Sprint("ask", i), "chat", "ask")); err != nil {
					b.Fatal(err)
				}
				<-out.questions
				handed := time.Now()
				if _, err := p2.Accept(ctx, pending(fmt.Sprint("answer", i), "chat", "1")); err != nil {
					b.Fatal(err)
				}
				took = append(took, (<-returned).Sub(handed))
				if got := <-out.answers; got != "got Yes" {
					b.Fatalf("answered %q", got)
				}
			}
			after := statements()
			slices.Sort(took)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
			b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
			if before >= 0 && after >= 0 {
				b.ReportMetric((after-before)/float64(len(took)), "stmts/answer")
			}
		})
	}
}
