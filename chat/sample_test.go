package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/tools"
)

// A server's sampling request runs on the chat's model with the server's
// system prompt and bound, and its tokens count in the chat's session; a
// request larger than the history budget is refused before it reaches
// the model.
func TestSampleRunsOnTheModelAndCounts(t *testing.T) {
	e := newEnv(t, chat.Config{HistoryTokens: 2000})
	e.Model.Text("a short summary")
	text, _, err := e.Engine.Sample(context.Background(), "c1", "u", chat.Sampling{System: "You summarize.", MaxTokens: 30,
		Messages: []chat.Message{{Role: chat.RoleUser, Text: "Summarize: tides"}}})
	if err != nil || text != "a short summary" {
		t.Fatalf("Sample = %q, %v", text, err)
	}
	req := e.Model.Last(t)
	if req.Messages[0].Content != "You summarize." || req.Messages[1].Content != "Summarize: tides" || req.MaxTokens != 30 || len(req.Tools) != 0 {
		t.Fatalf("request = %+v", req)
	}
	st, err := e.Engine.Status(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Usage.PromptTokens+st.Usage.CompletionTokens == 0 {
		t.Fatalf("the sampling's tokens were not counted: %+v", st.Usage)
	}
	n := len(e.Model.Requests())
	_, _, err = e.Engine.Sample(context.Background(), "c1", "u", chat.Sampling{Messages: []chat.Message{{Role: chat.RoleUser, Text: strings.Repeat("tides and moons ", 2000)}}})
	if !errors.Is(err, chat.ErrSamplingTooLarge) || len(e.Model.Requests()) != n {
		t.Fatalf("a request past the budget = %v (%d model requests)", err, len(e.Model.Requests())-n)
	}
}

// A sampling request with tools sends the server's tools and the
// conversation's calls and results to the model, and gives back the
// model's calls (which nobody here runs): the chat's own tools are
// never offered.
func TestSampleWithToolsPassesToolsAndCalls(t *testing.T) {
	e := newEnv(t, chat.Config{HistoryTokens: 2000, Model: "main-model"})
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{{ID: "m1", Name: "weather", Arguments: `{"city":"Oslo"}`}}})
	lookup := tools.Definition{Name: "weather", Description: "The weather of a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}
	s := chat.Sampling{System: "You plan.", Tools: []tools.Definition{lookup}, Messages: []chat.Message{
		{Role: chat.RoleUser, Text: "Plan a trip to Oslo"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "s1", Name: "weather", Arguments: `{"city":"Bergen"}`}}},
		{Role: chat.RoleTool, ToolCallID: "s1", Text: "rain"},
	}}
	got, err := e.Engine.SampleWithTools(context.Background(), "c1", "u", s)
	if err != nil || len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != "weather" || got.ToolCalls[0].Arguments != `{"city":"Oslo"}` || got.Model != "main-model" {
		t.Fatalf("SampleWithTools = %+v, %v", got, err)
	}
	req := e.Model.Last(t)
	if names := chattest.ToolNames(req); len(names) != 1 || names[0] != "weather" {
		t.Fatalf("tools sent = %v", names)
	}
	if len(req.Messages) != 4 || len(req.Messages[2].ToolCalls) != 1 || req.Messages[2].ToolCalls[0].Function.Arguments != `{"city":"Bergen"}` ||
		req.Messages[3].Role != "tool" || req.Messages[3].ToolCallID != "s1" || req.Messages[3].Content != "rain" {
		t.Fatalf("messages sent = %+v", req.Messages)
	}
	// Without tools, a tool message is refused before the model.
	n := len(e.Model.Requests())
	s.Tools = nil
	if _, err := e.Engine.SampleWithTools(context.Background(), "c1", "u", s); err == nil || len(e.Model.Requests()) != n {
		t.Fatalf("tool messages without tools = %v", err)
	}
}

// The server's model hints pick a model only when one names a model the
// deployment offers (the chat's, llm.model, a fallback's); any other
// hint leaves the chat's model.
func TestSampleModelHintsPickOnlyOfferedModels(t *testing.T) {
	e := newEnv(t, chat.Config{HistoryTokens: 2000, Model: "main-model"})
	ask := func(hints ...string) string {
		t.Helper()
		e.Model.Text("ok")
		got, err := e.Engine.SampleWithTools(context.Background(), "c1", "u", chat.Sampling{Hints: hints, Models: []string{"", "small-fast-1"},
			Messages: []chat.Message{{Role: chat.RoleUser, Text: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		if sent := e.Model.Last(t).Model; sent != got.Model {
			t.Fatalf("sent %q, answered %q", sent, got.Model)
		}
		return got.Model
	}
	for _, c := range []struct {
		hints []string
		want  string
	}{
		{nil, "main-model"},
		{[]string{"claude-3-opus"}, "main-model"},
		{[]string{"claude-3-opus", "small-fast"}, "small-fast-1"},
		{[]string{"SMALL"}, "small-fast-1"},
		{[]string{"main", "small"}, "main-model"},
		{[]string{""}, "main-model"},
	} {
		if got := ask(c.hints...); got != c.want {
			t.Errorf("hints %q picked %q, want %q", c.hints, got, c.want)
		}
	}
}
