package history_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/store"
	"loadout/tools"
	"loadout/tools/history"
)

func TestSearchHistoryTool(t *testing.T) {
	db, err := store.OpenTest(filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	s, _ := db.OpenSession(ctx, "slack:T1:C1")
	db.Append(ctx, s.ID, []chat.Message{{Role: chat.RoleUser, Text: "Ship the release on Tuesday"}}, chat.Usage{})
	r := tools.NewRegistry()
	if err := r.Add(history.Tool(db)); err != nil {
		t.Fatal(err)
	}
	call := func(chatKey, args string) tools.Result {
		c := tools.WithCaller(ctx, tools.Caller{ChatKey: chatKey})
		return tools.NewExecutor(r, nil).Run(c, nil, []tools.Call{{ID: "1", Name: "search_history", Arguments: args}})[0]
	}
	if res := call("slack:T1:C1", `{"query":"release date"}`); !strings.Contains(res.Content, "Tuesday") {
		t.Errorf("search: %+v", res)
	}
	if res := call("slack:T1:C2", `{"query":"release"}`); strings.Contains(res.Content, "Tuesday") || !strings.Contains(res.Content, "Nothing found") {
		t.Errorf("another chat: %+v", res)
	}
	if res := call("slack:T1:C1", `{"query":"!!"}`); res.Code != tools.CodeInvalidArgument {
		t.Errorf("no words: %+v", res)
	}
	if res := call("slack:T1:C1", `{}`); res.Code != tools.CodeMissingParameter {
		t.Errorf("no query: %+v", res)
	}
}
