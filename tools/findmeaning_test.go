package tools_test

import (
	"context"
	"strings"
	"testing"

	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/tools"
)

// With embeddings, find_tools finds a tool by a word of its meaning that
// neither its texts nor the index's synonyms have; with the service
// down, it ranks by words, and asks the service again only after a
// while.
func TestFindToolsByMeaning(t *testing.T) {
	fake := chattest.NewEmbeddingsServer(t)
	r := tools.NewRegistry()
	noop := func(context.Context, struct{}) (any, error) { return "ok", nil }
	if err := r.Add(tools.FindToolsByMeaning(r, fake.Client("fake-embed", openai.EmbedOptions{})),
		tools.New(tools.Definition{Name: "book_visit", Description: "Book a visit with a physician.", Examples: []string{"see the doctor next week"}}, noop),
		tools.New(tools.Definition{Name: "buy_tickets", Description: "Buy cinema tickets.", Examples: []string{"two seats for the film tonight"}}, noop),
	); err != nil {
		t.Fatal(err)
	}
	find := func() string {
		ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "c", UserKey: "u"})
		return tools.NewExecutor(r, nil).Run(ctx, nil, []tools.Call{{ID: "1", Name: tools.FindToolsName, Arguments: `{"query":"a medic for my knee"}`}})[0].Content
	}
	if got := find(); !strings.HasPrefix(got, "- book_visit ") {
		t.Fatalf("by meaning: %s", got)
	}
	fake.Fail(true)
	asked := fake.Requests()
	if got := find(); strings.Contains(got, "book_visit") {
		t.Errorf("by words, with the service down: %s", got)
	}
	find()
	if n := fake.Requests() - asked; n != 2 {
		t.Errorf("the service, down, was asked %d times in two searches (two attempts, then a pause)", n)
	}
}
