package chat

import (
	"context"
	"fmt"
	"math"
)

// minSampleAnswer is the fewest answer tokens a sampling request is
// run for (or its own maxTokens, if fewer): when what is left under a
// cap leaves less room than that, it is refused, as an answer cut that
// short is of no use to the server.
const minSampleAnswer = 16

// reservation is what a sampling request holds of the person's spend
// while it runs: the charge to settle (nil when nothing is counted) and
// the bound of its answer.
type reservation struct {
	held      *Charge
	maxTokens int
}

// reserve holds what a sampling request of userKey in chatKey may cost
// before it reaches the model: prompt tokens (the estimate, in the
// model's tokens) and an answer of at most maxTokens (0: no bound of its
// own), priced at model's price, charged atomically in the ledger
// against the caps, so requests made at once cannot each pass a cap on
// the same room. The answer's bound is clamped to what is left under
// every cap. Past a cap, or with no room for an answer, it is refused
// with ErrSamplingCapped and nothing is held. Without a ledger nothing is
// counted, and the request is not held to caps (none can be read).
func (e *Engine) reserve(ctx context.Context, userKey, chatKey, model string, prompt, maxTokens int) (reservation, error) {
	if e.cfg.Ledger == nil {
		return reservation{maxTokens: maxTokens}, nil
	}
	l := e.cfg.Limits
	p := l.period()
	capped := l.capped(userKey)
	priced := len(e.cfg.Prices) > 0
	var price Price
	if priced {
		price = e.price(model)
	}
	held := Charge{UserKey: userKey, ChatKey: chatKey, Day: p.day}
	answer := maxTokens
	err := e.cfg.Ledger.Reserve(ctx, userKey, chatKey, p.day, p.monthStart, func(s Spent) (Spend, error) {
		answer = maxTokens
		if capped {
			a := l.allowance(p, s, priced, false)
			if c, over := a.Reached(); over {
				return Spend{}, fmt.Errorf("%w: %s", ErrSamplingCapped, a.Refusal(c))
			}
			room, tightest := a.room(prompt, price)
			if room < math.MaxInt32 && (answer <= 0 || answer > room) {
				answer = room
			}
			floor := minSampleAnswer
			if maxTokens > 0 {
				floor = min(floor, maxTokens)
			}
			if answer < floor {
				return Spend{}, fmt.Errorf("%w: %s", ErrSamplingCapped, a.noRoom(tightest))
			}
		}
		held.Spend = e.spend(model, Usage{PromptTokens: prompt, CompletionTokens: max(answer, 0)})
		return held.Spend, nil
	})
	if err != nil {
		return reservation{}, err
	}
	return reservation{held: &held, maxTokens: answer}, nil
}

// settle replaces r's hold with what the call cost, even when ctx was
// cut (the provider charged for it); spent is zero for a call that
// failed.
func (e *Engine) settle(ctx context.Context, r reservation, spent Spend) error {
	if r.held == nil {
		return nil
	}
	if err := e.cfg.Ledger.Settle(context.WithoutCancel(ctx), *r.held, spent); err != nil {
		return fmt.Errorf("count the spend of %s in %s: %w", r.held.UserKey, r.held.ChatKey, err)
	}
	if spent != (Spend{}) {
		c := *r.held
		c.Spend = spent
		e.charged(c)
	}
	return nil
}

// room is how many answer tokens fit under every cap of a after prompt
// tokens, at price p (for the caps in money), and the cap that holds
// it to that.
func (a Allowance) room(prompt int, p Price) (int, Cap) {
	room, tightest := math.Inf(1), Cap{}
	for _, c := range a.Caps {
		left := c.Limit - c.Used
		r := left - float64(prompt)
		if c.Money {
			left -= float64(prompt) * p.Input / 1e6
			switch {
			case left <= 0:
				r = 0
			case p.Output > 0:
				r = left * 1e6 / p.Output
			default:
				r = math.Inf(1) // answers cost nothing here
			}
		}
		if r < room {
			room, tightest = r, c
		}
	}
	return int(min(max(math.Floor(room), 0), math.MaxInt32)), tightest
}

// noRoom is the sentence a request is refused with when what is left
// under cap c leaves no room for its answer.
func (a Allowance) noRoom(c Cap) string {
	who, period := "your", "today"
	if c.Chat {
		who = "this chat's"
	}
	if c.Monthly {
		period = "this month"
	}
	return fmt.Sprintf("Sorry, what is left of %s allowance of %s for %s (%s) is too little for an answer to this request. %s",
		who, c.amount(c.Limit), period, c.Key, c.resets(a.Now))
}
