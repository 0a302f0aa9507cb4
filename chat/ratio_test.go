package chat_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/store/storetest"
	"loadout/tools"
)

// scaledModel reports a prompt cost of factor times the engine's own
// estimate of each request, as a model whose tokenizer counts more than
// the estimate would.
type scaledModel struct {
	factor float64
	sent   []int // messages per request
}

func (m *scaledModel) Complete(_ context.Context, req chat.Request) (chat.Response, error) {
	count := func(s string) int { return (len(s) + 3) / 4 } // the engine's default estimate
	est := 0
	for _, msg := range req.Messages {
		if msg.Role == chat.RoleSystem {
			est += count(msg.Text)
		} else {
			est += 4 + count(msg.Text)
		}
	}
	for _, d := range req.Tools {
		est += count(tools.SchemaText(d))
	}
	m.sent = append(m.sent, len(req.Messages))
	return chat.Response{Text: strings.Repeat("answer ", 40), Usage: chat.Usage{PromptTokens: int(m.factor * float64(est)), CompletionTokens: 5}}, nil
}

// The budget follows what the model reports: when the model counts about
// 1.8 times the estimate, the ratio settles there, is kept in the store,
// and fewer messages fit in a request than for a model that counts as
// estimated.
func TestHistoryBudgetFollowsReportedTokens(t *testing.T) {
	run := func(factor float64) (*scaledModel, *storetest.Env) {
		env := storetest.NewEnv(t, storetest.Options{})
		m := &scaledModel{factor: factor}
		e := chat.New(chat.Config{HistoryTokens: 2000, Model: "m"}, m, env.Store, env.Registry)
		for i := range 40 {
			if _, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c", UserKey: "u", Text: fmt.Sprintf("question %d %s", i, strings.Repeat("words ", 30))}); err != nil {
				t.Fatal(err)
			}
		}
		return m, env
	}
	same, _ := run(1)
	more, env := run(1.8)
	last := func(m *scaledModel) int { return m.sent[len(m.sent)-1] }
	if last(more) >= last(same) {
		t.Fatalf("requests carry %d messages when the model counts 1.8x, %d when it counts 1x; want fewer", last(more), last(same))
	}
	v, err := env.Store.State(context.Background(), "token_ratio:m")
	r, _ := strconv.ParseFloat(v, 64)
	if err != nil || r < 1.6 || r > 1.9 {
		t.Fatalf("kept ratio = %q (%v), want about 1.8", v, err)
	}
	// A fresh engine on the same store starts from the kept ratio.
	m := &scaledModel{factor: 1.8}
	e := chat.New(chat.Config{HistoryTokens: 2000, Model: "m"}, m, env.Store, env.Registry)
	if _, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c", UserKey: "u", Text: "again"}); err != nil {
		t.Fatal(err)
	}
	if got := m.sent[0]; got > last(more)+2 {
		t.Fatalf("after a restart the request carries %d messages, want about %d as before", got, last(more))
	}
}
