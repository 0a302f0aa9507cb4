package chat_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store"
	"loadout/store/storetest"
	"loadout/tools"
)

// clock is a settable time for the limits.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

func capEnv(t *testing.T, l chat.Limits, c *clock, prices map[string]chat.Price) *storetest.Env {
	l.Now = c.Now
	return storetest.NewEnv(t, storetest.Options{Config: chat.Config{Model: "m", Limits: l, Prices: prices}, Register: testTools})
}

func from(t *testing.T, e *storetest.Env, chatKey, userKey, text string) chat.Reply {
	t.Helper()
	return handle(t, e, chat.Inbound{ChatKey: chatKey, UserKey: userKey, Text: text})
}

// A person past their daily cap is answered with a sentence naming the
// cap and when it resets, and the message never reaches the model;
// another person in the same chat is not held by it; the next day the
// count starts again.
func TestDailyCapRefusesBeforeTheModel(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 21, 30, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 100}, c, nil)
	e.Model.Push(chattest.Step{Text: "A long answer.", Usage: chat.Usage{PromptTokens: 80, CompletionTokens: 30}})
	if r := from(t, e, "g", "ana", "hello"); r.Text != "A long answer." {
		t.Fatalf("first answer %q", r.Text)
	}
	r := from(t, e, "g", "ana", "and again")
	want := "Sorry, you have used up today's allowance of 100 tokens (limits.daily_tokens_per_person), so I can't pass this message on to the model. It starts again at 00:00 UTC, in 2h 30m."
	if r.Text != want {
		t.Fatalf("refusal\n got %q\nwant %q", r.Text, want)
	}
	if n := len(e.Model.Requests()); n != 1 {
		t.Fatalf("%d model calls, want the first only", n)
	}
	e.Model.Text("Hi Bea.")
	if r := from(t, e, "g", "bea", "hi"); r.Text != "Hi Bea." {
		t.Fatalf("another person in the chat: %q", r.Text)
	}
	c.set(time.Date(2026, 11, 27, 0, 1, 0, 0, time.UTC))
	e.Model.Text("A new day.")
	if r := from(t, e, "g", "ana", "morning"); r.Text != "A new day." {
		t.Fatalf("after midnight: %q", r.Text)
	}
	// The refused message is kept in the conversation with its answer.
	sess, err := e.Store.OpenSession(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	hist, err := e.Store.Recent(context.Background(), sess.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range hist {
		texts = append(texts, m.Text)
	}
	if !strings.Contains(strings.Join(texts, "|"), "and again|"+want) {
		t.Fatalf("history %q", texts)
	}
}

// The chat's cap holds everyone's turns together: one person's spend
// leaves the others of a group nothing.
func TestChatCapCountsEveryone(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerChat: 100}, c, nil)
	e.Model.Push(chattest.Step{Text: "ok", Usage: chat.Usage{PromptTokens: 90, CompletionTokens: 20}})
	from(t, e, "group", "ana", "a long question")
	r := from(t, e, "group", "bea", "my turn")
	if !strings.HasPrefix(r.Text, "Sorry, this chat has used up today's allowance of 100 tokens (limits.daily_tokens_per_chat)") {
		t.Fatalf("refusal %q", r.Text)
	}
	e.Model.Text("elsewhere")
	if r := from(t, e, "private", "bea", "hi"); r.Text != "elsewhere" {
		t.Fatalf("another chat: %q", r.Text)
	}
}

// The month is counted in the configured time zone: late on the last
// day there, the cap holds and names the first of the month as its reset;
// after local midnight it is lifted.
func TestMonthlyCapResetsInTheTimeZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	c := &clock{now: time.Date(2026, 11, 30, 23, 0, 0, 0, ny)} // 1 December in UTC
	e := capEnv(t, chat.Limits{MonthlyTokensPerPerson: 50, Location: ny}, c, nil)
	e.Model.Text("ok")
	from(t, e, "c", "ana", "one")
	e.Model.Text("ok")
	from(t, e, "c", "ana", "two")
	e.Model.Text("ok")
	from(t, e, "c", "ana", "three")
	e.Model.Text("ok")
	from(t, e, "c", "ana", "four")
	r := from(t, e, "c", "ana", "five")
	want := "Sorry, you have used up this month's allowance of 50 tokens (limits.monthly_tokens_per_person), so I can't pass this message on to the model. It starts again on 1 December at 00:00 EST, in 1h 0m."
	if r.Text != want {
		t.Fatalf("refusal\n got %q\nwant %q", r.Text, want)
	}
	c.set(time.Date(2026, 12, 1, 0, 5, 0, 0, ny))
	e.Model.Text("December")
	if r := from(t, e, "c", "ana", "six"); r.Text != "December" {
		t.Fatalf("new month: %q", r.Text)
	}
}

// A turn whose model call crosses the cap finishes the step it asked
// for (the tool runs, its result is recorded) and then stops with a
// sentence, without calling the model again.
func TestTurnCrossingTheCapStopsAfterItsStep(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 100}, c, nil)
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{{Name: "ping", Arguments: `{"text":"x"}`}}, Usage: chat.Usage{PromptTokens: 90, CompletionTokens: 20}})
	e.Model.Text("never asked")
	r := from(t, e, "c", "ana", "ping please")
	if !strings.HasPrefix(r.Text, "I stopped here: you have used up today's allowance of 100 tokens (limits.daily_tokens_per_person) while I was working on this. It starts again at 00:00 UTC") {
		t.Fatalf("stop %q", r.Text)
	}
	if n := len(e.Model.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	sess, _ := e.Store.OpenSession(context.Background(), "c")
	hist, _ := e.Store.Recent(context.Background(), sess.ID, 50)
	var ran bool
	for _, m := range hist {
		ran = ran || (m.Role == chat.RoleTool && m.ToolName == "ping" && m.Status == tools.StatusSuccess)
	}
	if !ran || hist[len(hist)-1].Text != r.Text {
		t.Fatalf("the step did not finish, or the stop was not recorded: %+v", hist)
	}
}

// Money: the call is priced at llm.prices (cached prompt tokens at the
// cached price), the cap in money refuses the next message, and the
// store's query gives the chat's cost over the day.
func TestCostCapAtThePrices(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	prices := map[string]chat.Price{"m": {Input: 1, CachedInput: 0.1, Output: 2}, "other": {Input: 3, Output: 9}}
	e := capEnv(t, chat.Limits{DailyCostPerPerson: 0.5}, c, prices)
	e.Model.Push(chattest.Step{Text: "costly", Usage: chat.Usage{PromptTokens: 1_000_000, CachedTokens: 500_000, CompletionTokens: 100_000}})
	from(t, e, "c", "ana", "go")
	r := from(t, e, "c", "ana", "more")
	if !strings.HasPrefix(r.Text, "Sorry, you have used up today's allowance of 0.50 (limits.daily_cost_per_person)") {
		t.Fatalf("refusal %q", r.Text)
	}
	ctx := context.Background()
	got, err := e.Store.SpendOver(ctx, store.SpendQuery{ChatKey: "c", From: "2026-11-26", To: "2026-11-26"})
	// 0.5M × 1 + 0.5M × 0.1 + 0.1M × 2, per million.
	if err != nil || math.Abs(got.Cost-0.75) > 1e-9 || got.Tokens() != 1_100_000 || got.CachedTokens != 500_000 {
		t.Fatalf("spend %+v, %v", got, err)
	}
	// A model llm.prices leaves out is priced at the dearest listed.
	s, err := e.Engine.Charge(ctx, "ana", "c", "unlisted", chat.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000})
	if err != nil || math.Abs(s.Cost-12) > 1e-9 {
		t.Fatalf("unlisted model charged %+v, %v", s, err)
	}
	if got, _ := e.Store.SpendOver(ctx, store.SpendQuery{UserKey: "ana"}); math.Abs(got.Cost-12.75) > 1e-9 {
		t.Fatalf("the person's spend %+v", got)
	}
}

// A provider that reports no usage is counted by the estimate.
func TestUnreportedUsageIsEstimated(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 1_000_000}, c, nil)
	e.Model.Push(chattest.Step{Text: strings.Repeat("word ", 200), NoUsage: true})
	from(t, e, "c", "ana", "say a lot")
	s, err := e.Store.Spent(context.Background(), "ana", "c", "2026-11-26", "2026-11-01")
	if err != nil {
		t.Fatal(err)
	}
	// The answer's thousand bytes are about 250 tokens; the request
	// (system prompt, tool schemas, message) more than 50.
	if s.PersonDay.CompletionTokens < 200 || s.PersonDay.PromptTokens < 50 {
		t.Fatalf("estimated spend %+v", s.PersonDay)
	}
}

// Admins (tools.admins) are counted but not capped, unless
// limits.cap_admins says so; Allowance reports what is left.
func TestAdminsAreCappedOnlyWhenConfigured(t *testing.T) {
	for _, capAdmins := range []bool{false, true} {
		c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
		e := capEnv(t, chat.Limits{DailyTokensPerPerson: 10, CapAdmins: capAdmins, Admins: tools.NewAdmins([]string{"boss"})}, c, nil)
		e.Model.Text("one")
		from(t, e, "c", "boss", "a")
		e.Model.Text("two")
		r := from(t, e, "c", "boss", "b")
		if refused := strings.HasPrefix(r.Text, "Sorry, you have used up"); refused != capAdmins {
			t.Fatalf("cap_admins %v: %q", capAdmins, r.Text)
		}
		a, err := e.Engine.Allowance(context.Background(), "boss", "c")
		if err != nil {
			t.Fatal(err)
		}
		if a.Exempt == capAdmins || (len(a.Caps) > 0) != capAdmins {
			t.Fatalf("cap_admins %v: allowance %+v", capAdmins, a)
		}
		if capAdmins && (a.Caps[0].Left() != 0 || a.Caps[0].Used != 15) {
			t.Fatalf("allowance %+v", a.Caps[0])
		}
	}
}

// A scheduled task's run (unattended, as its owner) is held to its
// owner's caps like a message of theirs.
func TestScheduledRunIsHeldToItsOwnersCap(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 15}, c, nil)
	e.Model.Text("done")
	from(t, e, "c", "ana", "hello")
	r := handle(t, e, chat.Inbound{ChatKey: "c", UserKey: "ana", Text: "the daily digest", Unattended: true})
	if !strings.HasPrefix(r.Text, "Sorry, you have used up today's allowance of 15 tokens") || len(e.Model.Requests()) != 1 {
		t.Fatalf("scheduled run past the cap: %q, %d model calls", r.Text, len(e.Model.Requests()))
	}
}

// Every model call is counted once, whether its round is recorded with
// the charge in one transaction (an answer, a tool round) or asks for
// approval (its charge written on its own).
func TestEveryModelCallIsCountedOnce(t *testing.T) {
	o := &outbox{}
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	e := confirmEnv(t, o, chat.Config{Limits: chat.Limits{DailyTokensPerPerson: 10_000, Now: c.Now}}, "")
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{{Name: "mail_read", Arguments: `{"text":"x"}`}}, Usage: chat.Usage{PromptTokens: 100, CompletionTokens: 1}})
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{{Name: "mail_send", Arguments: `{"to":"bob@example.com","subject":"Hi","body":"hi"}`}}, Usage: chat.Usage{PromptTokens: 200, CompletionTokens: 2}})
	r := handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "ana", Text: "read then send"})
	if r.Ask == "" {
		t.Fatalf("not asked: %q", r.Text)
	}
	e.Model.Push(chattest.Step{Text: "Sent.", Usage: chat.Usage{PromptTokens: 400, CompletionTokens: 4}})
	decide(t, e, "ana", r.Ask, "press1", true)
	s, err := e.Store.Spent(context.Background(), "ana", "c1", "2026-11-26", "2026-11-26")
	if err != nil || s.PersonDay.Tokens() != 707 {
		t.Fatalf("spent %+v, %v; want 707 tokens from three calls", s.PersonDay, err)
	}
}

// A model call outside a turn (an MCP server's sampling request) is
// checked with Allowance and counted with Charge: its tokens hold the
// person's next message, and past the cap Allowance says so with the
// sentence to answer.
func TestCallsOutsideATurnAreCheckedAndCounted(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 1000}, c, nil)
	ctx := context.Background()
	a, err := e.Engine.Allowance(ctx, "ana", "c")
	if _, reached := a.Reached(); err != nil || reached || a.Caps[0].Left() != 1000 {
		t.Fatalf("before: %+v, %v", a, err)
	}
	if _, err := e.Engine.Charge(ctx, "ana", "c", "m", chat.Usage{PromptTokens: 900, CompletionTokens: 100}); err != nil {
		t.Fatal(err)
	}
	a, err = e.Engine.Allowance(ctx, "ana", "c")
	cp, reached := a.Reached()
	if err != nil || !reached || a.Refusal(cp) != "Sorry, you have used up today's allowance of 1,000 tokens (limits.daily_tokens_per_person), so I can't pass this message on to the model. It starts again at 00:00 UTC, in 2h 0m." {
		t.Fatalf("after: %+v, %v", a, err)
	}
	if r := from(t, e, "c", "ana", "hi"); !strings.HasPrefix(r.Text, "Sorry, you have used up") || len(e.Model.Requests()) != 0 {
		t.Fatalf("the next message: %q", r.Text)
	}
}

// An MCP server's sampling request is held to the person's cap like a
// turn: it is charged to them, and past the cap it is refused before it
// reaches the model.
func TestSamplingIsHeldToThePersonsCap(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 26, 21, 30, 0, 0, time.UTC)}
	e := capEnv(t, chat.Limits{DailyTokensPerPerson: 100}, c, nil)
	e.Model.Push(chattest.Step{Text: "a summary", Usage: chat.Usage{PromptTokens: 90, CompletionTokens: 20}})
	s := chat.Sampling{Messages: []chat.Message{{Role: chat.RoleUser, Text: "Summarize: tides"}}}
	if text, _, err := e.Engine.Sample(context.Background(), "g", "ana", s); err != nil || text != "a summary" {
		t.Fatalf("Sample = %q, %v", text, err)
	}
	_, _, err := e.Engine.Sample(context.Background(), "g", "ana", s)
	if !errors.Is(err, chat.ErrSamplingCapped) || !strings.Contains(err.Error(), "limits.daily_tokens_per_person") || len(e.Model.Requests()) != 1 {
		t.Fatalf("past the cap = %v, %d model calls", err, len(e.Model.Requests()))
	}
	if r := from(t, e, "g", "ana", "hello"); !strings.Contains(r.Text, "used up today's allowance") {
		t.Fatalf("a message after the sampling: %q", r.Text)
	}
}
