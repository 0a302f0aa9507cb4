package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"loadout/tools"
)

// script is a tools.Asker that answers from a list and records the
// questions.
type script struct {
	mu      sync.Mutex
	answers []string
	asked   []tools.Question
	err     error // returned once the answers run out
}

func (s *script) Ask(ctx context.Context, q tools.Question) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, q)
	if len(s.answers) == 0 {
		if s.err != nil {
			return "", s.err
		}
		return "", tools.ErrNotAnswered
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return a, nil
}

// runAs calls a tool as a turn would, with asker in the context.
func runAs(t *testing.T, reg *tools.Registry, asker tools.Asker, name, args string) tools.Result {
	t.Helper()
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local", UserKey: "console:local"})
	if asker != nil {
		ctx = tools.WithAsker(ctx, asker)
	}
	return tools.NewExecutor(reg, quiet).Run(ctx, reg.Catalog(true, nil, nil),
		[]tools.Call{{ID: "c1", Name: name, Arguments: args}})[0]
}

func demo(t *testing.T) *tools.Registry {
	reg := newRegistry(t)
	c := New(Server{Name: "demo", transport: inMemory(t, nil)}, Deps{}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return reg
}

// A server's form is asked one field at a time, each answer checked
// against its schema (a wrong one asked again with the reason), and the
// answers go back to the server as typed values.
func TestElicitationAsksTheFormFieldByField(t *testing.T) {
	reg := demo(t)
	// Required fields come first, then the others by name.
	s := &script{answers: []string{"Accept", "", "Ada", "200", "36", "blue", "2"}}
	r := runAs(t, reg, s, "demo_ask_name", `{}`)
	if r.Status != tools.StatusSuccess || !strings.HasPrefix(r.Content, "accept ") {
		t.Fatalf("result = %+v", r)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(r.Content, "accept ")), &got); err != nil {
		t.Fatal(err)
	}
	if got["name"] != "Ada" || got["color"] != "green" || got["age"] != float64(36) {
		t.Fatalf("the server got %v", got)
	}
	if len(s.asked) != 7 {
		t.Fatalf("%d questions: %+v", len(s.asked), s.asked)
	}
	if q := s.asked[0]; !strings.Contains(q.Text, "What should I call you?") || strings.Join(q.Choices, ",") != "Accept,Decline,Cancel" {
		t.Errorf("first question = %+v", q)
	}
	if q := s.asked[2]; !strings.Contains(q.Text, "This one is needed") {
		t.Errorf("an empty required answer was not asked again: %+v", q)
	}
	if q := s.asked[4]; !strings.Contains(q.Text, "does not fit") || !strings.Contains(q.Text, "from 0 to 150") {
		t.Errorf("an out-of-range age was not asked again: %+v", q)
	}
	if q := s.asked[5]; strings.Join(q.Choices, ",") != "red,green" {
		t.Errorf("the enum is not offered as choices: %+v", q)
	}
	if q := s.asked[6]; !strings.Contains(q.Text, "does not fit") {
		t.Errorf("a wrong choice was not asked again: %+v", q)
	}
}

// Decline and cancel reach the server as such; a question nobody answers
// in time is a cancel.
func TestElicitationDeclineAndCancelReachTheServer(t *testing.T) {
	reg := demo(t)
	for answer, want := range map[string]string{"Decline": "decline", "Cancel": "cancel", "": "cancel"} {
		s := &script{}
		if answer != "" {
			s.answers = []string{answer}
		}
		r := runAs(t, reg, s, "demo_ask_name", `{}`)
		if !strings.HasPrefix(r.Content, want+" ") {
			t.Errorf("%q: result = %+v", answer, r)
		}
		if len(s.asked) != 1 {
			t.Errorf("%q: asked %d questions", answer, len(s.asked))
		}
	}
}

// A schema a chat cannot ask (a nested object) is refused to the server
// and the person is asked nothing; so is a call with nobody to ask.
func TestElicitationRefusesWhatItCannotAsk(t *testing.T) {
	reg := demo(t)
	s := &script{answers: []string{"Accept"}}
	if r := runAs(t, reg, s, "demo_ask_nested", `{}`); r.Status == tools.StatusSuccess {
		t.Fatalf("nested form = %+v", r)
	}
	if len(s.asked) != 0 {
		t.Fatalf("the person was asked %+v", s.asked)
	}
	if r := runAs(t, reg, nil, "demo_ask_name", `{}`); r.Status == tools.StatusSuccess {
		t.Fatalf("with nobody to ask = %+v", r)
	}
}

// A server that asks again and again is refused after maxElicitations
// questions, and one that asks again after a decline at once.
func TestElicitationStopsAServerThatPesters(t *testing.T) {
	reg := demo(t)
	s := &script{answers: []string{"Accept", "yes", "Accept", "yes", "Accept", "yes", "Accept", "yes", "Accept", "yes"}}
	if r := runAs(t, reg, s, "demo_pester", `{}`); r.Status == tools.StatusSuccess {
		t.Fatalf("pester = %+v", r)
	}
	if n := countFirst(s.asked); n != maxElicitations {
		t.Fatalf("the person was asked %d questions", n)
	}
	d := &script{answers: []string{"Decline", "Accept", "yes"}}
	if r := runAs(t, reg, d, "demo_pester", `{}`); r.Status == tools.StatusSuccess {
		t.Fatalf("pester after a decline = %+v", r)
	}
	if len(d.asked) != 1 {
		t.Fatalf("asked again after a decline: %+v", d.asked)
	}
}

func countFirst(qs []tools.Question) int {
	n := 0
	for _, q := range qs {
		if strings.Contains(q.Text, "asks you") {
			n++
		}
	}
	return n
}

// group is an Asker of a group chat: a private question is refused.
type group struct{ script }

func (g *group) Ask(ctx context.Context, q tools.Question) (string, error) {
	if q.Private {
		return "", tools.ErrNotPrivate
	}
	return g.script.Ask(ctx, q)
}

// A URL elicitation's link goes only to a private chat, and only an https
// link: in a group, or for a plain-http link, the server gets an error
// and nobody sees the link.
func TestURLElicitationIsPrivateAndHTTPS(t *testing.T) {
	reg := demo(t)
	s := &script{answers: []string{"Done"}}
	if r := runAs(t, reg, s, "demo_ask_url", `{"text":"https://auth.example/start?x=1"}`); r.Content != "link accept" {
		t.Fatalf("private = %+v", r)
	}
	if q := s.asked[0]; !q.Private || !strings.Contains(q.Text, "https://auth.example/start?x=1") {
		t.Fatalf("question = %+v", q)
	}
	g := &group{}
	if r := runAs(t, reg, g, "demo_ask_url", `{"text":"https://auth.example/start"}`); r.Status == tools.StatusSuccess {
		t.Fatalf("in a group = %+v", r)
	}
	if len(g.asked) != 0 {
		t.Fatalf("the link was shown in a group: %+v", g.asked)
	}
	h := &script{answers: []string{"Done"}}
	if r := runAs(t, reg, h, "demo_ask_url", `{"text":"http://auth.example/start"}`); r.Status == tools.StatusSuccess || len(h.asked) != 0 {
		t.Fatalf("plain http = %+v, asked %+v", r, h.asked)
	}
}
