package chat

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"loadout/config"
	"loadout/tools"
)

// Limits are the spend caps (the limits section): tokens, and where
// llm.prices sets prices, money, a person may spend in a day or a month
// and a chat in a day. Zero is no cap. A message past a cap is answered
// with a sentence naming it and when it resets, and never reaches the
// model; a turn that crosses one finishes its current step and stops.
type Limits struct {
	DailyTokensPerPerson   int64 `yaml:"daily_tokens_per_person"`
	DailyTokensPerChat     int64 `yaml:"daily_tokens_per_chat"`
	MonthlyTokensPerPerson int64 `yaml:"monthly_tokens_per_person"`
	// The costs are in the currency of llm.prices.
	DailyCostPerPerson   float64 `yaml:"daily_cost_per_person"`
	DailyCostPerChat     float64 `yaml:"daily_cost_per_chat"`
	MonthlyCostPerPerson float64 `yaml:"monthly_cost_per_person"`
	// CapAdmins caps the admins (tools.admins) too; by default they are
	// counted but never refused.
	CapAdmins bool `yaml:"cap_admins"`

	// Admins are tools.admins.
	Admins tools.Admins `yaml:"-"`
	// Location is where days and months begin (agent.time_zone); nil is
	// UTC.
	Location *time.Location `yaml:"-"`
	// Now is the clock; default time.Now.
	Now func() time.Time `yaml:"-"`
}

// Check checks the limits section.
func (l Limits) Check(ch *config.Checker) {
	for _, c := range []struct {
		key string
		v   int64
	}{
		{"daily_tokens_per_person", l.DailyTokensPerPerson}, {"daily_tokens_per_chat", l.DailyTokensPerChat},
		{"monthly_tokens_per_person", l.MonthlyTokensPerPerson},
	} {
		if c.v < 0 {
			ch.Bad(c.key, "must be 0 (no cap) or a number of tokens, got %d", c.v)
		}
	}
	for _, c := range []struct {
		key string
		v   float64
	}{
		{"daily_cost_per_person", l.DailyCostPerPerson}, {"daily_cost_per_chat", l.DailyCostPerChat},
		{"monthly_cost_per_person", l.MonthlyCostPerPerson},
	} {
		if c.v < 0 || math.IsNaN(c.v) || math.IsInf(c.v, 0) {
			ch.Bad(c.key, "must be 0 (no cap) or an amount in the currency of llm.prices, got %v", c.v)
		}
	}
}

// Capped reports whether any cap is set.
func (l Limits) Capped() bool {
	return l.DailyTokensPerPerson > 0 || l.DailyTokensPerChat > 0 || l.MonthlyTokensPerPerson > 0 || l.Costly()
}

// Costly reports whether a cap in money is set.
func (l Limits) Costly() bool {
	return l.DailyCostPerPerson > 0 || l.DailyCostPerChat > 0 || l.MonthlyCostPerPerson > 0
}

// Price is what a model costs, per million tokens (llm.prices.MODEL).
type Price struct {
	Input float64 `yaml:"input"`
	// CachedInput is for prompt tokens served from the provider's cache;
	// 0 is the input price.
	CachedInput float64 `yaml:"cached_input"`
	Output      float64 `yaml:"output"`
}

// cost is what usage costs at p.
func (p Price) cost(u Usage) float64 {
	cached := min(max(u.CachedTokens, 0), u.PromptTokens)
	in := cmp.Or(p.CachedInput, p.Input)
	return (float64(u.PromptTokens-cached)*p.Input + float64(cached)*in + float64(u.CompletionTokens)*p.Output) / 1e6
}

// checkPrices checks llm.prices.
func checkPrices(ch *config.Checker, prices map[string]Price) {
	for _, model := range slices.Sorted(maps.Keys(prices)) {
		p := prices[model]
		for _, c := range []struct {
			what string
			v    float64
		}{{"input", p.Input}, {"cached_input", p.CachedInput}, {"output", p.Output}} {
			if c.v < 0 || math.IsNaN(c.v) || math.IsInf(c.v, 0) {
				ch.Bad("prices."+model+"."+c.what, "must be a price per million tokens, 0 or more, got %v", c.v)
			}
		}
	}
}

// Spend is what model calls cost: tokens, as the provider reported them
// (estimated where it reported none), and money at llm.prices.
type Spend struct {
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	// Cost is in the currency of llm.prices; 0 without prices.
	Cost float64
}

// Tokens are what the caps count: prompt and completion tokens.
func (s Spend) Tokens() int64 { return s.PromptTokens + s.CompletionTokens }

// Add returns the sum of s and o.
func (s Spend) Add(o Spend) Spend {
	return Spend{s.PromptTokens + o.PromptTokens, s.CompletionTokens + o.CompletionTokens, s.CachedTokens + o.CachedTokens, s.Cost + o.Cost}
}

// Charge is what one model call cost, charged to the person whose turn
// (or request) it served, in a chat, on a day.
type Charge struct {
	UserKey string
	ChatKey string
	// Day is the date in the limits' time zone, "2006-01-02".
	Day   string
	Spend Spend
}

// Spent is what the caps are checked against.
type Spent struct {
	// PersonDay and PersonMonth are the person's, in every chat.
	PersonDay   Spend
	PersonMonth Spend
	// ChatDay is the chat's, everyone's turns together.
	ChatDay Spend
}

// Ledger counts spend where every replica sees it (the store).
// Implementations must be safe for concurrent use.
type Ledger interface {
	// Charge adds what one model call cost to its person's, chat's and
	// day's count.
	Charge(ctx context.Context, c Charge) error
	// Spent returns the person's spend on day and from monthStart up to
	// and including day, and the chat's on day (days as in Charge). An
	// empty userKey or chatKey need not be read: its part is zero.
	Spent(ctx context.Context, userKey, chatKey, day, monthStart string) (Spent, error)
	// Reserve holds spend for a model call before it is made: it reads
	// what was spent as Spent does (the person's and the chat's), calls
	// fit with it, and charges the Spend fit returns as one call on day.
	// The read and the charge are atomic with respect to every other
	// Reserve of the same person or chat, in any process sharing the
	// ledger: two reservations never both fit into the same room. An
	// error of fit is returned as it is, and nothing is charged.
	Reserve(ctx context.Context, userKey, chatKey, day, monthStart string, fit func(Spent) (Spend, error)) error
	// Settle replaces a hold Reserve charged (held, with the person,
	// chat and day it was charged to) with what the call cost: spent is
	// added and held.Spend taken off. The call is not counted again.
	Settle(ctx context.Context, held Charge, spent Spend) error
}

// ChargingStore is an optional Store feature, of a store that is also
// the engine's Ledger: AppendCharged is Append that adds c to the ledger
// in the same transaction, so counting a model call costs no write of
// its own. The engine uses it for the rounds it records with Append.
type ChargingStore interface {
	AppendCharged(ctx context.Context, sessionID int64, msgs []Message, usage Usage, c Charge, audit ...AuditEntry) error
}

// Cap is one cap as it stands for a person in a chat.
type Cap struct {
	// Key is the cap's config key, e.g. "limits.daily_tokens_per_person".
	Key string
	// Chat is set for a cap on the chat rather than the person; Monthly
	// for one that resets at the start of a month; Money for one in
	// money rather than tokens.
	Chat, Monthly, Money bool
	// Limit and Used are tokens, or for a cap in money, amounts.
	Limit, Used float64
	// Resets is when the count starts again.
	Resets time.Time
}

// Left is what remains under the cap, never below zero.
func (c Cap) Left() float64 { return max(c.Limit-c.Used, 0) }

// Reached reports whether nothing is left.
func (c Cap) Reached() bool { return c.Used >= c.Limit }

// Allowance is what a person may still spend in a chat.
type Allowance struct {
	// Caps are the caps that apply, in the order of the config keys.
	Caps []Cap
	// Exempt is set for an admin who is not capped (limits.cap_admins).
	Exempt bool
	// Spent is the person's spend today and this month, and the chat's
	// today.
	Spent Spent
	// Priced is set when llm.prices sets prices.
	Priced bool
	// Now is when it was read, in the limits' time zone.
	Now time.Time
}

// Reached returns the first cap with nothing left.
func (a Allowance) Reached() (Cap, bool) {
	for _, c := range a.Caps {
		if c.Reached() {
			return c, true
		}
	}
	return Cap{}, false
}

// add counts s in every cap.
func (a *Allowance) add(s Spend) {
	for i := range a.Caps {
		if a.Caps[i].Money {
			a.Caps[i].Used += s.Cost
		} else {
			a.Caps[i].Used += float64(s.Tokens())
		}
	}
	a.Spent.PersonDay = a.Spent.PersonDay.Add(s)
	a.Spent.PersonMonth = a.Spent.PersonMonth.Add(s)
	a.Spent.ChatDay = a.Spent.ChatDay.Add(s)
}

// Refusal is the sentence a message past cap c is answered with.
func (a Allowance) Refusal(c Cap) string {
	return fmt.Sprintf("Sorry, %s, so I can't pass this message on to the model. %s", c.reached(), c.resets(a.Now))
}

// Stopped is the sentence a turn that crossed cap c ends with.
func (a Allowance) Stopped(c Cap) string {
	return fmt.Sprintf("I stopped here: %s while I was working on this. %s", c.reached(), c.resets(a.Now))
}

// reached says, in words, that the cap is used up.
func (c Cap) reached() string {
	who, period := "you have", "today's"
	if c.Chat {
		who = "this chat has"
	}
	if c.Monthly {
		period = "this month's"
	}
	return fmt.Sprintf("%s used up %s allowance of %s (%s)", who, period, c.amount(c.Limit), c.Key)
}

// amount renders a number of the cap's unit.
func (c Cap) amount(v float64) string {
	if c.Money {
		return fmt.Sprintf("%.2f", v)
	}
	return tools.Thousands(int(v)) + " tokens"
}

// resets says when the count starts again.
func (c Cap) resets(now time.Time) string {
	when := c.Resets.Format("at 15:04 MST")
	if c.Monthly {
		when = c.Resets.Format("on 2 January at 15:04 MST")
	}
	return fmt.Sprintf("It starts again %s, in %s.", when, until(c.Resets.Sub(now)))
}

// Line is the cap's /status line.
func (c Cap) Line(now time.Time) string {
	who, period := "You have", "today"
	if c.Chat {
		who = "This chat has"
	}
	if c.Monthly {
		period = "this month"
	}
	left := fmt.Sprintf("%.2f", c.Left())
	if !c.Money {
		left = tools.Thousands(int(c.Left()))
	}
	return fmt.Sprintf("%s %s of %s left %s (%s; resets in %s)", who, left, c.amount(c.Limit), period, c.Key, until(c.Resets.Sub(now)))
}

// until renders a wait for people: "3h 5m", "12m", "4d 2h".
func until(d time.Duration) string {
	d = max(d.Round(time.Minute), time.Minute)
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// period is the day and month the limits count in at now.
type period struct {
	now                time.Time
	day, monthStart    string
	nextDay, nextMonth time.Time
}

func (l Limits) period() period {
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	now = now.In(cmp.Or(l.Location, time.UTC))
	y, m, d := now.Date()
	return period{
		now:        now,
		day:        now.Format(time.DateOnly),
		monthStart: time.Date(y, m, 1, 0, 0, 0, 0, now.Location()).Format(time.DateOnly),
		nextDay:    time.Date(y, m, d+1, 0, 0, 0, 0, now.Location()),
		nextMonth:  time.Date(y, m+1, 1, 0, 0, 0, 0, now.Location()),
	}
}

// capped reports whether userKey is held to the caps.
func (l Limits) capped(userKey string) bool {
	return l.Capped() && (l.CapAdmins || !l.Admins.Has(userKey))
}

// allowance builds the caps that apply from what was spent.
func (l Limits) allowance(p period, s Spent, priced, exempt bool) Allowance {
	a := Allowance{Spent: s, Priced: priced, Now: p.now, Exempt: exempt}
	if exempt {
		return a
	}
	add := func(key string, limit float64, chat, monthly, money bool) {
		if limit <= 0 {
			return
		}
		c := Cap{Key: "limits." + key, Chat: chat, Monthly: monthly, Money: money, Limit: limit, Resets: p.nextDay}
		if monthly {
			c.Resets = p.nextMonth
		}
		var from Spend
		switch {
		case chat:
			from = s.ChatDay
		case monthly:
			from = s.PersonMonth
		default:
			from = s.PersonDay
		}
		c.Used = float64(from.Tokens())
		if money {
			c.Used = from.Cost
		}
		a.Caps = append(a.Caps, c)
	}
	add("daily_tokens_per_person", float64(l.DailyTokensPerPerson), false, false, false)
	add("daily_tokens_per_chat", float64(l.DailyTokensPerChat), true, false, false)
	add("monthly_tokens_per_person", float64(l.MonthlyTokensPerPerson), false, true, false)
	add("daily_cost_per_person", l.DailyCostPerPerson, false, false, true)
	add("daily_cost_per_chat", l.DailyCostPerChat, true, false, true)
	add("monthly_cost_per_person", l.MonthlyCostPerPerson, false, true, true)
	return a
}
