package mcp

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/config"
	"loadout/tools"
)

// model is a Sampler that records what it was asked and answers with
// its queued answers, then with text.
type model struct {
	mu      sync.Mutex
	got     []SampleRequest
	answers []SampleAnswer
	text    string
}

func (m *model) sample(ctx context.Context, r SampleRequest) (SampleAnswer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, r)
	if len(m.answers) > 0 {
		a := m.answers[0]
		m.answers = m.answers[1:]
		return a, nil
	}
	return SampleAnswer{Text: m.text, Model: "fake-model"}, nil
}

// ruleBook keeps people's rules in memory, as the store does in a
// process (cmd/loadout's tests use the store itself).
type ruleBook struct {
	mu    sync.Mutex
	rules []tools.Rule
}

func (b *ruleBook) Rules(ctx context.Context, userKey string) ([]tools.Rule, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []tools.Rule
	for _, r := range b.rules {
		if r.Owner == userKey {
			out = append(out, r)
		}
	}
	return out, nil
}

func (b *ruleBook) AddRule(ctx context.Context, r tools.Rule) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rules = append(b.rules, r)
	return nil
}

// A server's sampling request reaches the model, with its system prompt
// and bound, once the person allowed it; the person is asked the first
// time only, and their yes is a rule of theirs: a new client (loadout
// restarted) finds it, and without it they are asked again. One who
// denies it sends nothing to the model.
func TestSamplingNeedsThePersonsApprovalOnce(t *testing.T) {
	m := &model{text: "short"}
	book := &ruleBook{}
	start := func() *tools.Registry {
		reg := newRegistry(t)
		c := New(Server{Name: "demo", transport: inMemory(t, nil)}, Deps{Sample: m.sample, Rules: book}, quiet)
		if err := Register(context.Background(), reg, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return reg
	}
	reg := start()

	deny := &script{answers: []string{"Deny"}}
	if r := runAs(t, reg, deny, "demo_summarize", `{"text":"a long story"}`); r.Status == tools.StatusSuccess {
		t.Fatalf("denied = %+v", r)
	}
	if len(m.got) != 0 || len(book.rules) != 0 {
		t.Fatalf("the model was asked after a denial: %+v, rules %+v", m.got, book.rules)
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
	if got.System != "You summarize." || got.MaxTokens != 50 || got.UserKey != "console:local" || got.Messages[0].Text != "Summarize: a long story" || len(got.Tools) != 0 {
		t.Fatalf("the model got %+v", got)
	}
	if len(book.rules) != 1 {
		t.Fatalf("rules = %+v", book.rules)
	}
	rule := book.rules[0]
	if rule.Owner != "console:local" || rule.Decision != tools.RuleAllow || rule.Scope.String() != "mcp_sampling (demo)" ||
		len(rule.Code) != 4 || strings.Trim(rule.Code, "abcdefghijkmnpqrstuvwxyz23456789") != "" {
		t.Fatalf("rule = %+v", rule)
	}
	again := &script{}
	if r := runAs(t, reg, again, "demo_summarize", `{"text":"more"}`); r.Status != tools.StatusSuccess || len(again.asked) != 0 {
		t.Fatalf("second time = %+v, asked %+v", r, again.asked)
	}
	// After a restart the rule still answers.
	reg = start()
	if r := runAs(t, reg, again, "demo_summarize", `{"text":"more"}`); r.Status != tools.StatusSuccess || len(again.asked) != 0 {
		t.Fatalf("after a restart = %+v, asked %+v", r, again.asked)
	}
	// Removed, the person is asked again.
	book.rules = nil
	if r := runAs(t, reg, again, "demo_summarize", `{"text":"more"}`); r.Status == tools.StatusSuccess || len(again.asked) != 1 {
		t.Fatalf("after the rule was removed = %+v, asked %+v", r, again.asked)
	}
}

// Sampling with tools is refused, before the person or the model is
// asked, unless the server's sampling_tools is true; then the server's
// tool reaches the model, the model's call goes back to the server as
// tool use (the server runs it; loadout runs nothing), and the server's
// result reaches the model with its call.
func TestSamplingWithToolsOnlyWhereTheConfigSaysSo(t *testing.T) {
	m := &model{}
	reg := newRegistry(t)
	c := New(Server{Name: "demo", transport: inMemory(t, nil)}, Deps{Sample: m.sample}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := &script{answers: []string{"Allow"}}
	if r := runAs(t, reg, ask, "demo_plan", `{"text":"Oslo"}`); r.Status == tools.StatusSuccess || !strings.Contains(r.Content, "sampling_tools: true") {
		t.Fatalf("with sampling_tools off = %+v", r)
	}
	if len(m.got) != 0 || len(ask.asked) != 0 {
		t.Fatalf("asked %+v, the model got %+v", ask.asked, m.got)
	}

	m = &model{answers: []SampleAnswer{
		{Calls: []SampleCall{{ID: "k1", Name: "weather", Arguments: `{"city":"Oslo"}`}}, Model: "fake-model"},
		{Text: "Go; it is sunny.", Model: "fake-model"},
	}}
	reg = newRegistry(t)
	book := &ruleBook{}
	c = New(Server{Name: "demo", SamplingTools: true, transport: inMemory(t, nil)}, Deps{Sample: m.sample, Rules: book}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask = &script{answers: []string{"Allow"}}
	r := runAs(t, reg, ask, "demo_plan", `{"text":"Oslo"}`)
	if r.Status != tools.StatusSuccess || !strings.HasPrefix(r.Content, "plan by fake-model (endTurn):") || !strings.Contains(r.Content, "Go; it is sunny.") {
		t.Fatalf("plan = %+v", r)
	}
	if len(ask.asked) != 1 || !strings.Contains(ask.asked[0].Text, "I run none of them") || len(m.got) != 2 {
		t.Fatalf("asked %+v, %d model requests", ask.asked, len(m.got))
	}
	first, second := m.got[0], m.got[1]
	if len(first.Tools) != 1 || first.Tools[0].Name != "weather" || !strings.Contains(string(first.Tools[0].Parameters), `"city"`) ||
		!slices.Equal(first.Hints, []string{"planner"}) || first.System != "You plan trips." {
		t.Fatalf("first request = %+v", first)
	}
	want := []SampleMessage{
		{Role: "user", Text: "Plan a trip to Oslo"},
		{Role: "assistant", Calls: []SampleCall{{ID: "k1", Name: "weather", Arguments: `{"city":"Oslo"}`}}},
		{Role: "tool", CallID: "k1", Text: "sunny in Oslo"},
	}
	if len(second.Messages) != len(want) {
		t.Fatalf("second request = %+v", second.Messages)
	}
	for i := range want {
		g, w := second.Messages[i], want[i]
		if g.Role != w.Role || g.Text != w.Text || g.CallID != w.CallID || !slices.Equal(g.Calls, w.Calls) {
			t.Fatalf("message %d = %+v, want %+v", i, g, w)
		}
	}
}

// The model's calls go back to the server as tool use, with stop reason
// toolUse; its text too.
func TestSampleAnswersToolUse(t *testing.T) {
	c := New(Server{Name: "demo", SamplingTools: true}, Deps{}, quiet)
	res, err := c.sampleResult(SampleAnswer{Text: "Checking.", Calls: []SampleCall{{ID: "k1", Name: "weather", Arguments: `{"city":"Oslo"}`}}, Model: "m1"})
	if err != nil || res.StopReason != "toolUse" || len(res.Content) != 2 {
		t.Fatalf("result = %+v, %v", res, err)
	}
	if u, ok := res.Content[1].(*sdk.ToolUseContent); !ok || u.ID != "k1" || u.Name != "weather" || u.Input["city"] != "Oslo" {
		t.Fatalf("tool use = %+v", res.Content[1])
	}
	if _, err := c.sampleResult(SampleAnswer{Calls: []SampleCall{{ID: "k2", Name: "weather", Arguments: `["Oslo"]`}}}); err == nil {
		t.Fatal("a call whose arguments are not an object was passed on")
	}
}

// No tool may take the name a sampling rule names, so such a rule never
// allows a call: a server "mcp" whose tool is "sampling" gets another
// name.
func TestSamplingRuleNamesNoTool(t *testing.T) {
	c := New(Server{Name: "mcp"}, Deps{}, quiet)
	if got := c.tool(&sdk.Tool{Name: "sampling"}, map[string]bool{}); got.Name != "mcp_sampling_2" {
		t.Fatalf("name = %q", got.Name)
	}
	reg := tools.NewRegistry()
	tool := c.tool(&sdk.Tool{Name: "sampling"}, map[string]bool{})
	tool.Name = SamplingRuleTool
	if err := reg.Add(tool); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("Add(mcp_sampling) = %v", err)
	}
}

// Without a sampler, sampling is not offered: the server's request fails.
func TestSamplingOffWithoutASampler(t *testing.T) {
	reg := demo(t)
	if r := runAs(t, reg, &script{answers: []string{"Allow"}}, "demo_summarize", `{"text":"x"}`); r.Status == tools.StatusSuccess {
		t.Fatalf("without sampling = %+v", r)
	}
}

// One call may make at most sampling_per_call sampling requests (10 by
// default), counted over all its rounds: the SDK fulfils a result's
// requests at once, so a result asking for more fails the call, and no
// more than the limit ever reach the model. A negative limit is a
// config error naming the key.
func TestSamplingRequestsPerCallAreLimited(t *testing.T) {
	for _, c := range []struct {
		limit, count, rounds int
		ok                   bool
	}{
		{0, 10, 1, true}, {0, 11, 1, false}, {3, 3, 1, true}, {3, 20, 1, false}, {3, 2, 2, false}, {4, 2, 2, true},
	} {
		m := &model{text: "ok"}
		allowed := &ruleBook{rules: []tools.Rule{{Code: "abcd", Owner: "console:local", Decision: tools.RuleAllow,
			Scope: tools.Scope{Tool: SamplingRuleTool, Action: "demo"}}}}
		reg := newRegistry(t)
		cl := New(Server{Name: "demo", SamplingPerCall: c.limit, transport: inMemory(t, nil)}, Deps{Sample: m.sample, Rules: allowed}, quiet)
		if err := Register(context.Background(), reg, cl); err != nil {
			t.Fatal(err)
		}
		r := runAs(t, reg, &script{}, "demo_fan_out", fmt.Sprintf(`{"count":%d,"rounds":%d}`, c.count, c.rounds))
		cl.Close()
		limit := cmp.Or(c.limit, DefaultSamplingPerCall)
		m.mu.Lock()
		got := len(m.got)
		m.mu.Unlock()
		if (r.Status == tools.StatusSuccess) != c.ok || got > limit || (c.ok && got != c.count*c.rounds) {
			t.Errorf("limit %d, %d×%d requests: %+v; %d reached the model", c.limit, c.rounds, c.count, r, got)
		}
		if !c.ok && !strings.Contains(r.Content, fmt.Sprintf("at most %d sampling requests (mcp.servers[].sampling_per_call)", limit)) {
			t.Errorf("limit %d, %d×%d requests: the refusal says %q", c.limit, c.rounds, c.count, r.Content)
		}
	}
	ch := &config.Checker{Section: "mcp"}
	Config{Servers: []Server{{Name: "demo", Command: "x", SamplingPerCall: -1}}}.Check(ch)
	if errs := ch.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "mcp.servers[0].sampling_per_call") {
		t.Fatalf("errors %v", errs)
	}
}
