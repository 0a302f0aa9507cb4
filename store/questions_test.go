package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"loadout/bridge"
)

func asked(turn, text string) bridge.AskedQuestion {
	return bridge.AskedQuestion{Channel: "telegram", ChatKey: "telegram:42", UserKey: "telegram:42", Event: "update:1", Turn: turn,
		Code: "#ab12", Text: text, Choices: []string{"red", "green"}, Expires: time.Now().Add(time.Minute)}
}

// A chat has one waiting question. A second of the same run is
// refused; one of another run (the turn resumed after a restart) ends
// the first. An answer is recorded once, taken once by the poll that
// reads it; expired and finished questions wait no more.
func TestQuestionsWaitOnePerChat(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	first, err := db.AskQuestion(ctx, asked("run1", "Colour?"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AskQuestion(ctx, asked("run1", "Size?")); !errors.Is(err, bridge.ErrAnotherQuestion) {
		t.Fatalf("a second question of one run: %v", err)
	}
	q, ok, err := db.WaitingQuestion(ctx, "telegram", "telegram:42")
	if err != nil || !ok || q.ID != first || q.Code != "#ab12" || len(q.Choices) != 2 || q.UserKey != "telegram:42" {
		t.Fatalf("waiting = %+v %v %v", q, ok, err)
	}
	second, err := db.AskQuestion(ctx, asked("run2", "Colour?"))
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := db.PollQuestion(ctx, first); q.State != bridge.QuestionEnded {
		t.Fatalf("the earlier run's question is %s", q.State)
	}
	// The message that answers is finished with the answer, in one
	// step: no process sees it unfinished and runs it as a message.
	it, _, err := db.Accept(ctx, "telegram", bridge.Pending{ID: "update:2", Inbound: chatInbound("telegram:42", "telegram:42", "2")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := db.SettleQuestion(ctx, second, bridge.QuestionAnswered, "2", it.Seq); !ok || err != nil {
		t.Fatalf("settle = %v %v", ok, err)
	}
	if items, _ := db.Unfinished(ctx, "telegram"); len(items) != 0 {
		t.Fatalf("the answer's event is unfinished: %+v", items)
	}
	again, _, _ := db.Accept(ctx, "telegram", bridge.Pending{ID: "update:3", Inbound: chatInbound("telegram:42", "telegram:42", "3")}, nil)
	if ok, _ := db.SettleQuestion(ctx, second, bridge.QuestionAnswered, "3", again.Seq); ok {
		t.Fatal("an answered question was settled again")
	}
	if items, _ := db.Unfinished(ctx, "telegram"); len(items) != 1 {
		t.Fatal("a message that answered nothing was finished")
	}
	if _, ok, _ := db.WaitingQuestion(ctx, "telegram", "telegram:42"); ok {
		t.Fatal("an answered question still waits")
	}
	if q, _ := db.PollQuestion(ctx, second); q.State != bridge.QuestionTaken || q.Answer != "2" {
		t.Fatalf("poll = %+v", q)
	}
	if q, _ := db.PollQuestion(ctx, second); q.State != bridge.QuestionTaken {
		t.Fatalf("second poll = %+v", q)
	}
	// Expired: not waiting, whatever its state says.
	old := asked("run3", "Late?")
	old.Expires = time.Now().Add(-time.Second)
	if _, err := db.AskQuestion(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.WaitingQuestion(ctx, "telegram", "telegram:42"); ok {
		t.Fatal("an expired question waits")
	}
	if _, err := db.Prune(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	var n int64
	db.Gorm().Model(&question{}).Count(&n)
	if n != 2 {
		t.Fatalf("%d questions after pruning the expired one", n)
	}
}

// A run resumed after a restart takes what the person answered the run
// that was cut, for the same question only, and only once.
func TestAnAnswerWaitsForTheRunThatResumes(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	id, err := db.AskQuestion(ctx, asked("cut", "Colour?"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := db.SettleQuestion(ctx, id, bridge.QuestionAnswered, "green", 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, _ := db.TakeAnswered(ctx, asked("cut", "Colour?")); ok {
		t.Fatal("the run that asked took its answer as a resumed run")
	}
	other := asked("resumed", "Colour?")
	other.Choices = []string{"red", "blue"}
	if _, ok, _ := db.TakeAnswered(ctx, other); ok {
		t.Fatal("an answer to other choices was taken")
	}
	if ans, ok, err := db.TakeAnswered(ctx, asked("resumed", "Colour?")); !ok || err != nil || ans != "green" {
		t.Fatalf("take = %q %v %v", ans, ok, err)
	}
	if _, ok, _ := db.TakeAnswered(ctx, asked("again", "Colour?")); ok {
		t.Fatal("an answer was taken twice")
	}
}

// A notice reaches this handle's listeners of its topic at once, once;
// on PostgreSQL another handle's too, through the database, and a
// handle does not hear its own notice twice. A listener whose context
// ended hears nothing more.
func TestNoticesReachTheListenersOfEveryHandle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	one, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard := make(chan string, 16)
	one.Listen(ctx, "q", func(p string) {
		if p != "" {
			heard <- "one:" + p
		}
	})
	one.Listen(ctx, "other", func(p string) {
		if p != "" {
			heard <- "other:" + p
		}
	})
	if err := one.Signal(ctx, "q", "7"); err != nil {
		t.Fatal(err)
	}
	if got := <-heard; got != "one:7" {
		t.Fatalf("heard %q", got)
	}
	if err := one.Signal(ctx, "q", ""); err == nil {
		t.Fatal("an empty notice was sent")
	}
	if !one.pg {
		return
	}
	two, err := OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	heard2 := make(chan string, 16)
	lctx, stop := context.WithCancel(ctx)
	two.Listen(lctx, "q", func(p string) { heard2 <- p })
	// The listening connection is made at the first Listen; it tells its
	// listeners (with "") once it listens.
	if got := <-heard2; got != "" {
		t.Fatalf("first notice %q", got)
	}
	if err := one.Signal(ctx, "q", "8"); err != nil {
		t.Fatal(err)
	}
	if got := <-heard; got != "one:8" {
		t.Fatalf("heard %q", got)
	}
	if got := <-heard2; got != "8" {
		t.Fatalf("the other handle heard %q", got)
	}
	if err := two.Signal(ctx, "q", "9"); err != nil {
		t.Fatal(err)
	}
	if got := <-heard2; got != "9" {
		t.Fatalf("the other handle heard %q", got)
	}
	if got := <-heard; got != "one:9" {
		t.Fatalf("heard %q", got)
	}
	// The first handle's own notice came back to it once only, and the
	// other topic heard none: the next it hears is this one.
	stop()
	if err := one.Signal(ctx, "other", "10"); err != nil {
		t.Fatal(err)
	}
	if got := <-heard; got != "other:10" {
		t.Fatalf("heard %q", got)
	}
	if err := two.Signal(ctx, "q", "11"); err != nil {
		t.Fatal(err)
	}
	if got := <-heard; got != "one:11" {
		t.Fatalf("heard %q", got)
	}
	if len(heard2) != 0 {
		t.Fatalf("a listener heard %q after its context ended", <-heard2)
	}
	// Another role on the database may NOTIFY on the channel: what it
	// sends without the key's signature is not heard.
	two.Listen(ctx, "q", func(p string) { heard2 <- p })
	for _, forged := range []string{"0123 mark q 99", "q 99", two.sig.sign("x q 98") + " x q 99"} {
		if err := one.db.Exec("SELECT pg_notify(?, ?)", one.sig.channel, forged).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := one.Signal(ctx, "q", "12"); err != nil {
		t.Fatal(err)
	}
	for got := <-heard2; got != "12"; got = <-heard2 {
		if got != "" {
			t.Fatalf("a forged notice was heard: %q", got)
		}
	}
}
