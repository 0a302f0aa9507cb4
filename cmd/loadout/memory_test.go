package main

import (
	"strings"
	"testing"

	"loadout/chat/chattest"
)

// In `loadout chat` a memory saved in one conversation is in the system
// prompt after /clear, and the cleared conversation is found by
// search_history.
func TestMemoryAndHistoryInTheConsole(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "")
	model.Call("memory", `{"action":"save","text":"The person's cat is called Miso"}`)
	model.Text("Noted: your cat is Miso.")
	if out, err := runCLI(t, "my cat is called Miso\n/clear\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Noted") {
		t.Fatalf("%v\n%s", err, out)
	}
	model.Call("load_tool_group", `{"group_name":"history"}`)
	model.Call("search_history", `{"query":"cat name"}`)
	model.Text("Miso.")
	if out, err := runCLI(t, "what is my cat called?\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Miso.") {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := model.Requests()
	fresh := reqs[2]
	if sys := chattest.System(fresh); !strings.Contains(sys, "What I remember about you") || !strings.Contains(sys, "The person's cat is called Miso") {
		t.Errorf("the new conversation's system prompt lacks the memory:\n%s", sys)
	}
	if len(fresh.Messages) != 2 {
		t.Errorf("the new conversation carries %d messages: /clear did not start afresh", len(fresh.Messages))
	}
	if got := lastToolResult(model); !strings.Contains(got, "is called Miso") || !strings.Contains(got, `"conversation":1`) {
		t.Errorf("search_history gave %s", got)
	}
}
