package chat

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"loadout/tools"
)

// rulesKey carries, in a round's context, the person's own rules, read
// from the store the first time a call of the round needs them.
type rulesKey struct{}

// ownRules are a person's rules for one round: its calls run at once,
// and only a call that would be asked reads them.
type ownRules struct {
	once  sync.Once
	read  func() ([]tools.Rule, error)
	rules []tools.Rule
}

// get returns the rules, read once; a store that fails gives none (the
// call is asked) and the failure is logged.
func (o *ownRules) get(log *slog.Logger) []tools.Rule {
	if o == nil {
		return nil
	}
	o.once.Do(func() {
		rules, err := o.read()
		if err != nil {
			log.Error("cannot read a person's rules; their calls are asked", "err", err)
			return
		}
		for _, r := range rules {
			if ruleScopeOK(r) {
				o.rules = append(o.rules, r)
			}
		}
	})
	return o.rules
}

// gate holds, in the executor, every call the policy and the rules say
// the person must approve: it does not run, and its result carries the
// summary the person will read. A call a deny rule covers is refused; one
// an allow rule covers runs without a question, unless the turn read
// untrusted content and the rule does not say even_after_untrusted. An
// approved call passes when its arguments still say what was approved.
// A scheduled run's call is held like any other: its owner is asked in
// the chat.
func (e *Engine) gate(ctx context.Context, d tools.Definition, c tools.Call, in tools.Input) (tools.Result, bool, func(tools.Result)) {
	caller := tools.CallerFrom(ctx)
	if caller.Approved == c.ID && c.ID != "" {
		if s := tools.Summary(ctx, d, in); s != caller.ApprovedSummary {
			te := &tools.Error{Code: codeChanged,
				Message:    fmt.Sprintf("Not done: what this would do has changed since the person approved it. Approved: %s. Now: %s.", caller.ApprovedSummary, s),
				Suggestion: "Tell the person; they can ask again if they still want it."}
			return tools.Result{Status: tools.StatusError, Code: te.Code, Content: te.JSON()}, true, nil
		}
		return tools.Result{}, false, nil
	}
	// The operator's rules first: they are in memory, and a person's own
	// rules (allow only) matter only for a call that would be asked. A
	// call's reach is read only when something looks at it: it may ask
	// a service (a reply's recipients).
	reach := sync.OnceValue(func() tools.Reach { return tools.ReachOf(ctx, d, in) })
	var rule tools.Rule
	var ruled bool
	if len(e.cfg.Rules) > 0 {
		rule, ruled = tools.Judge(e.cfg.Rules, d.Name, reach())
	}
	record := func(decision string, res *tools.Result) {
		entry := AuditEntry{ChatKey: caller.ChatKey, UserKey: caller.UserKey, SessionID: caller.SessionID, CallID: c.ID,
			Tool: d.Name, Summary: tools.Summary(ctx, d, in), Reach: reach().String(), ArgsHash: argsHash(in.JSON), Tainted: caller.Tainted,
			Decision: decision, Rule: rule.Code}
		if res != nil {
			entry.Outcome = outcome(*res)
		}
		if round, ok := ctx.Value(auditKey{}).(*auditRound); ok {
			// Written with the round's record, in its transaction.
			round.add(entry)
			return
		}
		if err := e.store.Audit(context.WithoutCancel(ctx), entry); err != nil {
			e.cfg.Logger.Error("cannot record a decision in the audit trail", "chat", caller.ChatKey, "tool", d.Name, "err", err)
		}
	}
	if ruled && rule.Decision == tools.RuleDeny {
		record(AuditDeniedByRule, nil)
		te := &tools.Error{Code: codeDeniedByRule,
			Message:    fmt.Sprintf("Not done: a rule (#%s) forbids %s.", rule.Code, rule.Scope),
			Suggestion: "Do not try it another way. Tell the person a rule forbids it (/rules lists their own)."}
		return tools.Result{Status: tools.StatusError, Code: te.Code, Content: te.JSON()}, true, nil
	}
	needs := e.cfg.Confirm.Needs(ctx, d, in.Value, caller.Tainted) || ruled && rule.Decision == tools.RuleAsk
	if !needs {
		return tools.Result{}, false, nil
	}
	effect := tools.EffectOf(ctx, d, in.Value)
	if o, _ := ctx.Value(rulesKey{}).(*ownRules); len(o.get(e.cfg.Logger)) > 0 {
		own := slices.DeleteFunc(slices.Clone(o.get(e.cfg.Logger)), func(r tools.Rule) bool { return !personRuleCovers(r, effect) })
		rule, ruled = tools.Judge(append(slices.Clip(e.cfg.Rules), own...), d.Name, reach())
	}
	// A person's allow never lifts a question the operator asks for every
	// call of the tool (tools.confirm_tools: always).
	operatorAsks := rule.Owner != "" && e.cfg.Confirm.Tools[d.Name] == tools.ConfirmAlways
	if ruled && rule.Decision == tools.RuleAllow && !operatorAsks && (!caller.Tainted || rule.EvenAfterUntrusted) {
		return tools.Result{}, false, func(res tools.Result) { record(AuditAllowedByRule, &res) }
	}
	r := reach()
	res := tools.Result{Status: tools.StatusPending, Content: tools.Summary(ctx, d, in), Reach: &r}
	if caller.UserKey != "" {
		if s, ok := tools.Offer(d, effect, r); ok {
			res.Offer = &s
		}
	}
	return res, true, nil
}

// auditKey carries, in a round's context, where the decisions rules make
// on its calls are kept until the round is recorded.
type auditKey struct{}

// auditRound is the decisions rules made on a round's calls, which run
// at once.
type auditRound struct {
	mu      sync.Mutex
	entries []AuditEntry
}

func (r *auditRound) add(e AuditEntry) {
	r.mu.Lock()
	r.entries = append(r.entries, e)
	r.mu.Unlock()
}

// take returns the decisions kept, and forgets them.
func (r *auditRound) take() []AuditEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.entries
	r.entries = nil
	return out
}

// argsHash is the audit trail's hash of a call's stored arguments.
func argsHash(args string) string {
	sum := sha256.Sum256([]byte(args))
	return hex.EncodeToString(sum[:])
}

// outcome is what became of a call that was let through, for the audit
// trail.
func outcome(r tools.Result) string {
	if r.Status == tools.StatusSuccess {
		return "ran"
	}
	return "failed: " + cmp.Or(r.Code, "error")
}

// withRules is ctx carrying the person's own rules for a round, read
// when a call first needs them.
func (e *Engine) withRules(ctx context.Context, userKey string) context.Context {
	own := &ownRules{read: func() ([]tools.Rule, error) {
		if userKey == "" {
			return nil, nil
		}
		return e.store.Rules(ctx, userKey)
	}}
	return context.WithValue(ctx, rulesKey{}, own)
}
