package chat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"loadout/tools"
)

// auditShown is how many decisions /audit lists.
const auditShown = 20

// RulesText lists, for /rules, the rules that decide the person's calls:
// their own, each with the code that removes it, and the operator's.
func (e *Engine) RulesText(ctx context.Context, in Inbound) (string, error) {
	own, err := e.store.Rules(ctx, in.UserKey)
	if err != nil {
		return "", fmt.Errorf("read the rules of %s: %w", in.UserKey, err)
	}
	var b strings.Builder
	if len(own) == 0 {
		b.WriteString("You have no rules of your own. When I ask for your approval, \"Always allow\" makes one, for what the question shows.")
	} else {
		b.WriteString("Your rules:")
		for _, r := range own {
			fmt.Fprintf(&b, "\n#%s — %s %s", r.Code, r.Decision, r.Scope)
		}
		fmt.Fprintf(&b, "\n\nRemove one with /rules remove #%s. Your rules for what I do never apply after I have read something from outside (a web page, an e-mail) in the same turn: then I ask again. A rule for mcp_sampling lets that service use the model for you.", own[0].Code)
	}
	if len(e.cfg.Rules) > 0 {
		b.WriteString("\n\nThe operator's rules, for everyone (yours cannot loosen them):")
		for _, r := range e.cfg.Rules {
			fmt.Fprintf(&b, "\n#%s — %s %s", r.Code, r.Decision, r.Scope)
			if r.EvenAfterUntrusted {
				b.WriteString(", even after outside content")
			}
		}
	}
	return b.String(), nil
}

// RemoveRule removes one of the person's own rules, for /rules remove.
func (e *Engine) RemoveRule(ctx context.Context, in Inbound, ref string) (string, error) {
	code := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(ref), "#"))
	if code == "" {
		return "Say which rule: /rules remove #code (/rules lists them).", nil
	}
	if strings.HasPrefix(code, "op") {
		return fmt.Sprintf("Rule #%s is the operator's; only the operator can change it.", code), nil
	}
	ok, err := e.store.RemoveRule(ctx, in.UserKey, code)
	if err != nil {
		return "", fmt.Errorf("remove rule %s of %s: %w", code, in.UserKey, err)
	}
	if !ok {
		return fmt.Sprintf("You have no rule #%s. /rules lists yours.", code), nil
	}
	return fmt.Sprintf("Removed rule #%s: I will ask you again for what it allowed.", code), nil
}

// AuditText lists, for /audit, the chat's newest decisions on calls: a
// person sees those on their own calls, an admin every one.
func (e *Engine) AuditText(ctx context.Context, in Inbound) (string, error) {
	who := in.UserKey
	if e.cfg.Admins.Has(in.UserKey) {
		who = ""
	}
	entries, err := e.store.AuditLog(ctx, in.ChatKey, who, auditShown)
	if err != nil {
		return "", fmt.Errorf("read the audit trail of %s: %w", in.ChatKey, err)
	}
	if len(entries) == 0 {
		return "Nothing has been decided here yet: no call waited for approval or met a rule.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The last %d decisions in this chat, newest first:", len(entries))
	for _, a := range entries {
		fmt.Fprintf(&b, "\n%s — %s: %s", a.At.UTC().Format(time.DateTime), auditWords(a), a.Summary)
		if who == "" {
			fmt.Fprintf(&b, " (asked by %s)", a.UserKey)
		}
		if a.Tainted {
			b.WriteString(" [after outside content]")
		}
	}
	return b.String(), nil
}

// auditWords says a decision and its outcome in plain words.
func auditWords(a AuditEntry) string {
	var w string
	switch a.Decision {
	case AuditApproved:
		w = "approved"
		if a.DecidedBy != "" && a.DecidedBy != a.UserKey {
			w += " by " + a.DecidedBy
		}
	case AuditAllowedByRule:
		w = "allowed by rule #" + a.Rule
	case AuditDeniedByRule:
		w = "denied by rule #" + a.Rule
	default:
		w = a.Decision
	}
	if a.Outcome != "" {
		w += ", " + a.Outcome
	}
	return w
}

// ruleScopeOK reports whether r is a rule a person may hold: an allow of
// a scope "Always allow" could offer (tools.Offer). It guards what the
// store gives back, so a rule written by hand into the database cannot
// allow every tool or lift the taint rule.
func ruleScopeOK(r tools.Rule) bool {
	return r.Owner != "" && r.Decision == tools.RuleAllow && !r.EvenAfterUntrusted && r.Tool != "*"
}

// personRuleCovers reports whether a person's rule r may decide a call
// of the given effect: a rule that names no domain, host or folder
// never covers a destructive call, as "Always allow" never offers one.
// It holds for a rule written by hand into the database, and for a rule
// kept from a harmless call of a tool whose later call is destructive
// (a move into a shared folder).
func personRuleCovers(r tools.Rule, effect tools.Effect) bool {
	return effect < tools.EffectDestructive || len(r.Domains)+len(r.Hosts)+len(r.Folders) > 0
}
