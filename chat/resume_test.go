package chat_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"loadout/chat"
	"loadout/store/storetest"
)

func resume(t *testing.T, e interface {
	Handle(context.Context, chat.Inbound) (chat.Reply, error)
}, id, text string) chat.Reply {
	t.Helper()
	r, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: "u", Text: text, ID: id, Resume: true})
	if err != nil {
		t.Fatalf("Handle(resume %s): %v", id, err)
	}
	return r
}

func countUser(t *testing.T, e interface {
	OpenSession(context.Context, string) (chat.Session, error)
}, text string, recent func(int64) []chat.Message) int {
	t.Helper()
	sess, err := e.OpenSession(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range recent(sess.ID) {
		if m.Role == chat.RoleUser && m.Text == text {
			n++
		}
	}
	return n
}

// A message the pipeline runs again after its answer was recorded gets
// that answer back without another model call or a second record.
func TestResumeReturnsRecordedAnswer(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Text("first answer")
	if r, err := e.Engine.Handle(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "q", ID: "ch:1"}); err != nil || r.Text != "first answer" {
		t.Fatalf("Handle = %q, %v", r.Text, err)
	}
	if r := resume(t, e.Engine, "ch:1", "q"); r.Text != "first answer" {
		t.Fatalf("resumed answer %q", r.Text)
	}
	if n := len(e.Model.Requests()); n != 1 {
		t.Fatalf("model called %d times, want 1", n)
	}
	recent := func(id int64) []chat.Message { m, _ := e.Store.Recent(context.Background(), id, 50); return m }
	if n := countUser(t, e.Store, "q", recent); n != 1 {
		t.Fatalf("the message is recorded %d times", n)
	}
}

// A resumed message that was never recorded (the crash came before the
// engine saw it) is recorded once and answered.
func TestResumeOfUnrecordedMessageRecordsIt(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Text("answer")
	if r := resume(t, e.Engine, "ch:9", "new question"); r.Text != "answer" {
		t.Fatalf("answer %q", r.Text)
	}
	recent := func(id int64) []chat.Message { m, _ := e.Store.Recent(context.Background(), id, 50); return m }
	if n := countUser(t, e.Store, "new question", recent); n != 1 {
		t.Fatalf("the message is recorded %d times", n)
	}
}

// A turn cut after a tool round carries on from that round: the message is
// not recorded again and the model sees the round's result.
func TestResumeContinuesAfterRecordedRound(t *testing.T) {
	e := newEnv(t, chat.Config{})
	ctx := context.Background()
	sess, _ := e.Store.OpenSession(ctx, "c1")
	err := e.Store.Append(ctx, sess.ID, []chat.Message{
		{Role: chat.RoleUser, Text: "ping it", UserKey: "u", ExternalID: "ch:2"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call1", Name: "ping", Arguments: `{"text":"x"}`}}},
		{Role: chat.RoleTool, ToolCallID: "call1", ToolName: "ping", Status: "success", Text: `{"echo":"x","tool":"ping"}`},
	}, chat.Usage{})
	if err != nil {
		t.Fatal(err)
	}
	e.Model.Text("pong came back")
	if r := resume(t, e.Engine, "ch:2", "ping it"); r.Text != "pong came back" {
		t.Fatalf("answer %q", r.Text)
	}
	req := e.Model.Last(t)
	if got := toolResults(req)["call1"]; got == "" {
		t.Fatalf("the model did not see the recorded round: %+v", req.Messages)
	}
	recent := func(id int64) []chat.Message { m, _ := e.Store.Recent(ctx, id, 50); return m }
	if n := countUser(t, e.Store, "ping it", recent); n != 1 {
		t.Fatalf("the message is recorded %d times", n)
	}
}

// countingStore counts the store's write transactions.
type countingStore struct {
	chat.Store
	appends int
}

func (s *countingStore) Append(ctx context.Context, id int64, msgs []chat.Message, u chat.Usage, audit ...chat.AuditEntry) error {
	s.appends++
	return s.Store.Append(ctx, id, msgs, u, audit...)
}

// A turn answered in text writes once: the person's message and the
// answer in one transaction. A turn with a tool round writes once per
// round plus the answer.
func TestTurnWritesOncePerRecord(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	st := &countingStore{Store: env.Store}
	e := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, env.Model.Client(), st, env.Registry)
	env.Model.Text("hi")
	if _, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c", UserKey: "u", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if st.appends != 1 {
		t.Fatalf("a text turn wrote %d times, want 1", st.appends)
	}
	env.Model.Call("get_current_time", `{}`)
	env.Model.Text("noon")
	st.appends = 0
	if _, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c", UserKey: "u", Text: "time?"}); err != nil {
		t.Fatal(err)
	}
	if st.appends != 2 {
		t.Fatalf("a turn with one tool round wrote %d times, want 2", st.appends)
	}
	s, _ := env.Store.OpenSession(context.Background(), "c")
	if s.Messages != 2+4 {
		t.Fatalf("session holds %d messages, want 6", s.Messages)
	}
}
