package chat

import (
	"strings"
	"testing"
)

func TestTrimHistoryRepairsAndKeepsUnits(t *testing.T) {
	h := []Message{
		{Role: RoleTool, ToolCallID: "old", Text: "orphan result", Tokens: 5}, // its call is outside the window
		{Role: RoleUser, Text: "q1", Tokens: 5},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a"}, {ID: "b"}}, Tokens: 10}, // b never got a result
		{Role: RoleTool, ToolCallID: "a", Text: strings.Repeat("r", 50), Tokens: 20},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c"}}, Tokens: 10}, // no result at all: dropped
		{Role: RoleAssistant, Text: "answer 1", Tokens: 5},
		{Role: RoleUser, Text: "q2", Tokens: 5},
	}
	got := trimHistory(nil, h, 6, 1000, 10)
	var shape []string
	for _, m := range got {
		s := string(m.Role)
		for _, c := range m.ToolCalls {
			s += ":" + c.ID
		}
		if m.Role == RoleTool {
			s += "<" + m.ToolCallID
		}
		shape = append(shape, s)
	}
	want := "user assistant:a tool<a assistant user"
	if strings.Join(shape, " ") != want {
		t.Fatalf("kept %v, want %s", shape, want)
	}
	if r := got[2].Text; !strings.HasPrefix(r, strings.Repeat("r", 10)+"\n[… shortened: 40 of 50") {
		t.Errorf("earlier result not shortened: %q", r)
	}
	// The input is not modified.
	if len(h[2].ToolCalls) != 2 || len(h[3].Text) != 50 {
		t.Error("trimHistory changed its input")
	}
	// A tight budget keeps the current turn whole and drops older units
	// whole: never a call without its result.
	got = trimHistory(nil, h, 6, 12, 10)
	if len(got) != 2 || got[0].Text != "answer 1" || got[1].Text != "q2" {
		t.Fatalf("tight budget kept %+v", got)
	}
	if got := trimHistory(nil, h, 6, 0, 10); len(got) != 1 || got[0].Text != "q2" {
		t.Fatalf("zero budget kept %+v", got)
	}
}
