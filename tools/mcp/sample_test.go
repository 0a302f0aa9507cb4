package mcp

import (
	"context"
	"strings"
	"sync"
	"testing"

	"loadout/tools"
)

// model is a Sampler that records what it was asked.
type model struct {
	mu   sync.Mutex
	got  []SampleRequest
	text string
}

func (m *model) sample(ctx context.Context, r SampleRequest) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, r)
	return m.text, "fake-model", nil
}

// A server's sampling request reaches the model, with its system prompt
// and bound, once the person allowed it; the person is asked the first
// time only; one who denies it sends nothing to the model.
func TestSamplingNeedsThePersonsApprovalOnce(t *testing.T) {
	m := &model{text: "short"}
	reg := newRegistry(t)
	c := New(Server{Name: "demo", transport: inMemory(t, nil)}, Deps{Sample: m.sample}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	deny := &script{answers: []string{"Deny"}}
	if r := runAs(t, reg, deny, "demo_summarize", `{"text":"a long story"}`); r.Status == tools.StatusSuccess {
		t.Fatalf("denied = %+v", r)
	}
	if len(m.got) != 0 {
		t.Fatalf("the model was asked after a denial: %+v", m.got)
	}
	allow := &script{answers: []string{"Allow"}}
	r := runAs(t, reg, allow, "demo_summarize", `{"text":"a long story"}`)
	if r.Content != "summary by fake-model: short" {
		t.Fatalf("allowed = %+v", r)
	}
	if len(allow.asked) != 1 || !strings.Contains(allow.asked[0].Text, "Summarize: a long story") {
		t.Fatalf("questions = %+v", allow.asked)
	}
	got := m.got[0]
	if got.System != "You summarize." || got.MaxTokens != 50 || got.UserKey != "console:local" || got.Messages[0].Text != "Summarize: a long story" {
		t.Fatalf("the model got %+v", got)
	}
	again := &script{}
	if r := runAs(t, reg, again, "demo_summarize", `{"text":"more"}`); r.Status != tools.StatusSuccess || len(again.asked) != 0 {
		t.Fatalf("second time = %+v, asked %+v", r, again.asked)
	}
}

// Without a sampler, sampling is not offered: the server's request fails.
func TestSamplingOffWithoutASampler(t *testing.T) {
	reg := demo(t)
	if r := runAs(t, reg, &script{answers: []string{"Allow"}}, "demo_summarize", `{"text":"x"}`); r.Status == tools.StatusSuccess {
		t.Fatalf("without sampling = %+v", r)
	}
}
