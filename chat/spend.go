package chat

import (
	"context"
	"fmt"

	"loadout/tools"
)

// Allowance reads what userKey may still spend in chatKey under the
// caps (Config.Limits): the caps that apply with what is used of each,
// or none for an admin who is not capped (Exempt) or when no cap is set.
// It reads the store's ledger, which replicas share, once: what /status
// shows. A model call outside a turn that must be held to the caps
// reserves its spend instead, as Sample does: a read then a charge
// leaves room for calls made at once to pass a cap together.
func (e *Engine) Allowance(ctx context.Context, userKey, chatKey string) (Allowance, error) {
	l := e.cfg.Limits
	p := l.period()
	priced, exempt := len(e.cfg.Prices) > 0, l.Capped() && !l.capped(userKey)
	if e.cfg.Ledger == nil {
		return Allowance{Now: p.now, Priced: priced, Exempt: exempt}, nil
	}
	s, err := e.cfg.Ledger.Spent(ctx, userKey, chatKey, p.day, p.monthStart)
	if err != nil {
		return Allowance{}, fmt.Errorf("read the spend of %s in %s: %w", userKey, chatKey, err)
	}
	return l.allowance(p, s, priced, exempt), nil
}

// allowance is Allowance for a turn, in period p (which it sets when
// spend is counted): nil when the person is not capped, so the turn
// reads nothing.
func (e *Engine) allowance(ctx context.Context, userKey, chatKey string, p *period) (*Allowance, error) {
	l := e.cfg.Limits
	if e.cfg.Ledger == nil {
		return nil, nil // nothing counts, so p is not needed
	}
	*p = l.period()
	if !l.capped(userKey) {
		return nil, nil
	}
	from := p.monthStart
	if l.MonthlyTokensPerPerson <= 0 && l.MonthlyCostPerPerson <= 0 {
		// No cap reads the month: the day's rows alone are read, a
		// third of the time of a month's in three chats (BenchmarkSpend).
		from = p.day
	}
	// Only what a cap counts is read.
	who, where := userKey, chatKey
	if l.DailyTokensPerPerson <= 0 && l.DailyCostPerPerson <= 0 && l.MonthlyTokensPerPerson <= 0 && l.MonthlyCostPerPerson <= 0 {
		who = ""
	}
	if l.DailyTokensPerChat <= 0 && l.DailyCostPerChat <= 0 {
		where = ""
	}
	s, err := e.cfg.Ledger.Spent(ctx, who, where, p.day, from)
	if err != nil {
		return nil, fmt.Errorf("read the spend of %s in %s: %w", userKey, chatKey, err)
	}
	a := l.allowance(*p, s, len(e.cfg.Prices) > 0, false)
	return &a, nil
}

// Charge counts what one model call made for userKey in chatKey outside
// a turn cost: u as the provider reported it, priced at model's
// llm.prices. It returns what was counted. Without a ledger it counts
// nothing.
func (e *Engine) Charge(ctx context.Context, userKey, chatKey, model string, u Usage) (Spend, error) {
	if e.cfg.Ledger == nil {
		return e.spend(model, u), nil
	}
	c := Charge{UserKey: userKey, ChatKey: chatKey, Day: e.cfg.Limits.period().day, Spend: e.spend(model, u)}
	return c.Spend, e.commit(ctx, c)
}

// ChargeEmbedding counts an embeddings request of tokens against the
// caps of the context's Caller (tools.CallerFrom), at model's price; one
// that served nobody (the tool index) is not counted. A failure to count
// is logged: the search it served stands.
func (e *Engine) ChargeEmbedding(ctx context.Context, model string, tokens int) {
	c := tools.CallerFrom(ctx)
	if c.UserKey == "" {
		return
	}
	if _, err := e.Charge(ctx, c.UserKey, c.ChatKey, model, Usage{PromptTokens: tokens}); err != nil {
		e.cfg.Logger.Warn("the spend of an embeddings request was not counted", "err", err)
	}
}

// spend is what u cost at model's price.
func (e *Engine) spend(model string, u Usage) Spend {
	s := Spend{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens), CachedTokens: int64(u.CachedTokens)}
	if len(e.cfg.Prices) > 0 {
		s.Cost = e.price(model).cost(u)
	}
	return s
}

// commit adds c to the ledger on its own.
func (e *Engine) commit(ctx context.Context, c Charge) error {
	// Counted even when the turn is being cut short: the provider
	// charged for it.
	if err := e.cfg.Ledger.Charge(context.WithoutCancel(ctx), c); err != nil {
		return fmt.Errorf("count the spend of %s in %s: %w", c.UserKey, c.ChatKey, err)
	}
	e.charged(c)
	return nil
}

// charged tells Config.Charged of a charge the ledger holds.
func (e *Engine) charged(c Charge) {
	if e.cfg.Charged != nil {
		e.cfg.Charged(c)
	}
}

// price is model's price; a model llm.prices does not list is priced at
// the dearest listed (and logged, once).
func (e *Engine) price(model string) Price {
	if p, ok := e.cfg.Prices[model]; ok {
		return p
	}
	var dear Price
	for _, p := range e.cfg.Prices {
		dear.Input = max(dear.Input, p.Input)
		dear.CachedInput = max(dear.CachedInput, p.CachedInput, p.Input)
		dear.Output = max(dear.Output, p.Output)
	}
	if _, logged := e.unpriced.LoadOrStore(model, true); !logged {
		e.cfg.Logger.Warn("llm.prices has no price for a model that answered: it is counted at the dearest listed; add it to llm.prices", "model", model)
	}
	return dear
}

// spent is what a model call cost in tokens: what the provider
// reported, or, when it reported nothing, the request's estimate
// (scaled to the model's tokens) and the answer's.
func (e *Engine) spent(ctx context.Context, model string, estimated int, resp Response) Usage {
	u := resp.Usage
	if u.PromptTokens > 0 || u.CompletionTokens > 0 {
		return u
	}
	u.PromptTokens = int(float64(estimated) * e.ratio(ctx, model))
	u.CompletionTokens = e.countMessage(Message{Text: resp.Text, ToolCalls: resp.ToolCalls})
	return u
}

// Cost is what usage of model costs at llm.prices, and false when no
// prices are set: what the web console shows beside a chat's tokens.
func (e *Engine) Cost(model string, u Usage) (float64, bool) {
	if len(e.cfg.Prices) == 0 {
		return 0, false
	}
	return e.price(model).cost(u), true
}
