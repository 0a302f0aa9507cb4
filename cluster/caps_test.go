package cluster

import (
	"context"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// Two processes on one database (PostgreSQL with LOADOUT_TEST_DSN, else
// a SQLite file) share the spend caps' count: what a person spent
// through one replica holds them on the other, in another chat too, and
// the other's spend adds to the same rows.
func TestReplicasShareTheSpendCount(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfg := chat.Config{Limits: chat.Limits{DailyTokensPerPerson: 100, DailyTokensPerChat: 1000}}
	one := storetest.NewEnv(t, storetest.Options{Model: model, Config: cfg})
	two := storetest.NewEnv(t, storetest.Options{Model: model, Config: cfg, DBPath: one.DBPath})
	ctx := context.Background()
	model.Push(chattest.Step{Text: "from one", Usage: chat.Usage{PromptTokens: 40, CompletionTokens: 20}})
	if _, err := one.Engine.Handle(ctx, chat.Inbound{ChatKey: "telegram:1", UserKey: "telegram:ana", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	model.Push(chattest.Step{Text: "from two", Usage: chat.Usage{PromptTokens: 30, CompletionTokens: 15}})
	if r, err := two.Engine.Handle(ctx, chat.Inbound{ChatKey: "telegram:2", UserKey: "telegram:ana", Text: "hi"}); err != nil || r.Text != "from two" {
		t.Fatalf("second replica, under the cap: %q, %v", r.Text, err)
	}
	// 105 tokens spent through the two: both refuse now.
	for name, e := range map[string]*storetest.Env{"one": one, "two": two} {
		r, err := e.Engine.Handle(ctx, chat.Inbound{ChatKey: "telegram:1", UserKey: "telegram:ana", Text: "more"})
		if err != nil || !strings.HasPrefix(r.Text, "Sorry, you have used up today's allowance of 100 tokens") {
			t.Fatalf("replica %s: %q, %v", name, r.Text, err)
		}
	}
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2", n)
	}
	a, err := one.Engine.Allowance(ctx, "telegram:ana", "telegram:2")
	if err != nil || a.Spent.PersonDay.Tokens() != 105 || a.Spent.ChatDay.Tokens() != 45 {
		t.Fatalf("allowance read on one: %+v, %v", a.Spent, err)
	}
}
