package chat_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/store"
	"loadout/store/storetest"
	"loadout/tools"
	"loadout/tools/memory"
)

// Found by probing: in a group, one person's memory recall reached the
// model on the next person's turn, although memories are "never shown to
// anyone else". A personal result is kept for its owner's turns; on
// anyone else's the exact request the model receives carries a
// placeholder, while the shared conversation (the text) stays shared.
func TestPersonalResultsStayWithTheirPersonInAGroup(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "loadout.db")
	st, err := store.OpenTest(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	withMemory := func(r *tools.Registry) error { return r.Add(memory.Tool(memory.Config{}, st)) }
	env := storetest.NewEnv(t, storetest.Options{DBPath: dbPath, Register: withMemory})
	ctx := context.Background()
	if _, err := st.SaveMemory(ctx, "telegram:1001", "Ana's PIN is 4921"); err != nil {
		t.Fatal(err)
	}
	const group = "telegram:-100"
	ana := chat.Inbound{ChatKey: group, UserKey: "telegram:1001", Text: "what do you remember about me?"}
	env.Model.Call("memory", `{"action":"recall"}`)
	env.Model.Text("I remember a few things about you, Ana.")
	if _, err := env.Engine.Handle(ctx, ana); err != nil {
		t.Fatal(err)
	}
	if last := env.Model.Last(t); !strings.Contains(last.Messages[len(last.Messages)-1].Content, "4921") {
		t.Fatalf("Ana's own turn lacks her recall: %+v", last.Messages[len(last.Messages)-1])
	}
	bea := chat.Inbound{ChatKey: group, UserKey: "telegram:1002", Text: "and what was that PIN?"}
	env.Model.Text("I can't share that.")
	if _, err := env.Engine.Handle(ctx, bea); err != nil {
		t.Fatal(err)
	}
	req := env.Model.Last(t)
	placeholder := false
	for _, m := range req.Messages {
		if strings.Contains(m.Content, "4921") {
			t.Fatalf("Bea's turn carries Ana's memory: %q", m.Content)
		}
		if m.Role == "tool" && m.Content == "(a result for telegram:1001, not shown to others)" {
			placeholder = true
		}
	}
	if !placeholder {
		t.Fatalf("no placeholder in Bea's request: %+v", req.Messages)
	}
	// Ana's next turn (after a restart: from the store) sees it again.
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: dbPath, Model: env.Model, Register: withMemory})
	env.Model.Text("It is 4921.")
	ana.Text = "remind me of my PIN"
	if _, err := env2.Engine.Handle(ctx, ana); err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, m := range env.Model.Last(t).Messages {
		seen = seen || m.Role == "tool" && strings.Contains(m.Content, "4921")
	}
	if !seen {
		t.Fatal("Ana's own later turn lost her recall")
	}
}

// Found by probing: what the model copied from Ana's memory into a later
// call of her turn (memory search {"query":"PIN 4921"}, a web search for
// it) reached the model on Bea's turn in the call's arguments. On anyone
// else's turn, the calls made on Ana's turns after a personal result of
// hers carry a placeholder for their arguments, and for their results,
// which may echo them; Ana's own turns keep them.
func TestArgumentsCopiedFromAPersonalResultStayWithTheirPerson(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "loadout.db")
	st, err := store.OpenTest(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	register := func(r *tools.Registry) error {
		lookup := tools.New(tools.Definition{Name: "lookup", Description: "Look something up on the web", ReadOnly: true},
			func(_ context.Context, in echoIn) (any, error) { return "nothing found for " + in.Text, nil })
		return r.Add(memory.Tool(memory.Config{}, st), lookup)
	}
	env := storetest.NewEnv(t, storetest.Options{DBPath: dbPath, Register: register})
	ctx := context.Background()
	if _, err := st.SaveMemory(ctx, "telegram:1001", "Ana's PIN is 4921"); err != nil {
		t.Fatal(err)
	}
	const group = "telegram:-100"
	ana := chat.Inbound{ChatKey: group, UserKey: "telegram:1001", Text: "what is my PIN, and is it a common one?"}
	env.Model.Call("memory", `{"action":"recall"}`)
	env.Model.Call("memory", `{"action":"search","query":"PIN 4921"}`, "lookup", `{"text":"is 4921 a common PIN"}`)
	env.Model.Text("It is not a common one, Ana.")
	if _, err := env.Engine.Handle(ctx, ana); err != nil {
		t.Fatal(err)
	}
	bea := chat.Inbound{ChatKey: group, UserKey: "telegram:1002", Text: "what did Ana look up?"}
	env.Model.Text("I can't share that.")
	if _, err := env.Engine.Handle(ctx, bea); err != nil {
		t.Fatal(err)
	}
	calls, placeholders := 0, 0
	for _, m := range env.Model.Last(t).Messages {
		for _, c := range m.ToolCalls {
			calls++
			if strings.Contains(c.Function.Arguments, "4921") {
				t.Fatalf("Bea's turn carries a call's arguments copied from Ana's memory: %s %s", c.Function.Name, c.Function.Arguments)
			}
			if strings.Contains(c.Function.Arguments, "not shown to others") {
				placeholders++
			}
		}
		if strings.Contains(m.Content, "4921") {
			t.Fatalf("Bea's turn carries Ana's memory: %q", m.Content)
		}
	}
	if calls != 3 || placeholders != 2 {
		t.Fatalf("Bea's request holds %d calls, %d with a placeholder; want 3 and 2 (the recall's arguments say nothing)", calls, placeholders)
	}
	// Ana's own next turn keeps them.
	env.Model.Text("You looked up 4921.")
	ana.Text = "what did I look up?"
	if _, err := env.Engine.Handle(ctx, ana); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, m := range env.Model.Last(t).Messages {
		for _, c := range m.ToolCalls {
			if strings.Contains(c.Function.Arguments, "4921") {
				seen++
			}
		}
	}
	if seen != 2 {
		t.Fatalf("Ana's own later turn shows %d of her 2 calls' arguments", seen)
	}
}
