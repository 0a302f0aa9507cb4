package chat_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
)

// greedy makes the model answer every request slowly (so requests made
// at once are all in flight together) with as many tokens as it may
// (its max_tokens, else 450) and one prompt token: the worst a request
// can cost once it is let through.
func greedy(m *chattest.ModelServer) {
	m.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		out := req.MaxTokens
		if out == 0 {
			out = 450
		}
		return chattest.Step{Text: "a summary", Delay: 200 * time.Millisecond, Usage: chat.Usage{PromptTokens: 1, CompletionTokens: out}}
	}
}

// Twenty sampling requests made at once (as an MCP server's tool result
// can ask for, the SDK fulfilling them in parallel) are held to the cap
// together: each is reserved before it reaches the model, so no more
// run than the cap has room for, and what they spent stays within it.
// The two it fits run, and each hold is replaced with what its call
// cost.
func TestParallelSamplingStaysWithinTheCap(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 1000}, c, nil)
	greedy(e.Model)
	s := chat.Sampling{MaxTokens: 450, Messages: []chat.Message{{Role: chat.RoleUser, Text: "Summarize: tides"}}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, refused := 0, 0
	for range 20 {
		wg.Go(func() {
			_, _, err := e.Engine.Sample(context.Background(), "g", "ana", s)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ran++
			case errors.Is(err, chat.ErrSamplingCapped):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	reqs := e.Model.Requests()
	sent := 0
	for _, r := range reqs {
		sent += 1 + r.MaxTokens // what each call cost
	}
	spent, err := e.Store.Spent(context.Background(), "ana", "g", "2026-11-26", "2026-11-01")
	if err != nil {
		t.Fatal(err)
	}
	if ran < 2 || ran+refused != 20 || len(reqs) != ran {
		t.Fatalf("%d ran, %d refused, %d reached the model", ran, refused, len(reqs))
	}
	if spent.PersonDay.Tokens() > 1000 || spent.PersonDay.Tokens() != int64(sent) {
		t.Fatalf("the requests spent %d tokens against a cap of 1,000 (their calls cost %d)", spent.PersonDay.Tokens(), sent)
	}
}

// A sampling request's maxTokens is lowered to what is left under the
// caps (in tokens, and in money at the model's output price), and one
// with no bound of its own gets that bound; a bound that fits is kept.
// When what is left has no room for an answer, the request is refused
// before the model, saying so.
func TestSamplingMaxTokensIsClampedToWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	ask := func(e *storetest.Env, maxTokens int) (int, error) {
		t.Helper()
		n := len(e.Model.Requests())
		_, _, err := e.Engine.Sample(ctx, "g", "ana", chat.Sampling{MaxTokens: maxTokens, Messages: []chat.Message{{Role: chat.RoleUser, Text: "Summarize: tides"}}})
		if len(e.Model.Requests()) == n {
			return -1, err
		}
		return e.Model.Last(t).MaxTokens, err
	}
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}

	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 1000}, c, nil)
	if _, err := e.Engine.Charge(ctx, "ana", "elsewhere", "m", chat.Usage{PromptTokens: 600, CompletionTokens: 100}); err != nil {
		t.Fatal(err)
	}
	e.Model.Push(chattest.Step{Text: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}})
	// 300 are left, less the prompt's few.
	if got, err := ask(e, 4000); err != nil || got < 280 || got >= 300 {
		t.Fatalf("maxTokens 4000 was sent as %d (%v)", got, err)
	}
	e.Model.Push(chattest.Step{Text: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}})
	if got, err := ask(e, 0); err != nil || got < 280 || got >= 300 {
		t.Fatalf("no maxTokens was sent as %d (%v)", got, err)
	}
	e.Model.Push(chattest.Step{Text: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}})
	if got, err := ask(e, 100); err != nil || got != 100 {
		t.Fatalf("maxTokens 100 was sent as %d (%v)", got, err)
	}
	// Only what the calls cost is counted: their holds are gone.
	if s, err := e.Store.Spent(ctx, "ana", "g", "2026-11-26", "2026-11-01"); err != nil || s.PersonDay.Tokens() != 706 {
		t.Fatalf("spent %+v, %v; want 706 tokens", s.PersonDay, err)
	}
	if _, err := e.Engine.Charge(ctx, "ana", "elsewhere", "m", chat.Usage{PromptTokens: 290}); err != nil {
		t.Fatal(err)
	}
	got, err := ask(e, 4000)
	want := "Sorry, what is left of your allowance of 1,000 tokens for today (limits.daily_tokens_per_person) is too little for an answer to this request. It starts again at 00:00 UTC, in 12h 0m."
	if got != -1 || !errors.Is(err, chat.ErrSamplingCapped) || !strings.Contains(err.Error(), want) {
		t.Fatalf("with 4 tokens left: sent %d, %v", got, err)
	}

	// Money: 0.001 left at 2 a million tokens of output is 500 tokens,
	// less the prompt's at 1 a million.
	prices := map[string]chat.Price{"m": {Input: 1, Output: 2}}
	e = capEnv(t, chat.Limits{DailyCostPerPerson: 0.002}, c, prices)
	if _, err := e.Engine.Charge(ctx, "ana", "elsewhere", "m", chat.Usage{CompletionTokens: 500}); err != nil {
		t.Fatal(err)
	}
	e.Model.Push(chattest.Step{Text: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}})
	if got, err := ask(e, 4000); err != nil || got < 490 || got >= 500 {
		t.Fatalf("under a cap in money, maxTokens 4000 was sent as %d (%v)", got, err)
	}
}

// A turn reads the caps again after each round of tools: what was
// spent meanwhile elsewhere (a sampling request of the round's MCP
// call, the person's turn in another chat) stops it as its own spend
// would.
func TestTurnSeesWhatWasSpentDuringIt(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	var e *storetest.Env
	spendElsewhere := func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "summarize", Description: "Summarize with the model.", ReadOnly: true},
			func(ctx context.Context, in echoIn) (any, error) {
				_, err := e.Engine.Charge(ctx, "ana", "other", "m", chat.Usage{PromptTokens: 900, CompletionTokens: 100})
				return "summary", err
			}))
	}
	e = storetest.NewEnv(t, storetest.Options{Register: spendElsewhere,
		Config: chat.Config{Model: "m", Limits: chat.Limits{DailyTokensPerPerson: 500, Now: c.Now}}})
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{{Name: "summarize", Arguments: `{"text":"x"}`}}, Usage: chat.Usage{PromptTokens: 10, CompletionTokens: 5}})
	e.Model.Text("never asked")
	r := from(t, e, "c", "ana", "summarize it")
	if !strings.HasPrefix(r.Text, "I stopped here: you have used up today's allowance of 500 tokens") || len(e.Model.Requests()) != 1 {
		t.Fatalf("the turn went on past the cap: %q, %d model calls", r.Text, len(e.Model.Requests()))
	}
}
