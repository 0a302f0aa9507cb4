package tools

import (
	"crypto/rand"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Decisions of a rule, from the weakest to the strongest: when several
// rules match a call, deny wins over ask, and ask over allow.
const (
	RuleAllow = "allow"
	RuleAsk   = "ask"
	RuleDeny  = "deny"
)

// Scope is what a rule covers: one tool (or, in an operator's rule, "*"
// for every tool), optionally one action of it, and the domains, hosts
// and folders a call may reach (see Matches and Touches; what a call
// reaches is its declared Reach). A scope that names domains never
// covers a call to nobody.
type Scope struct {
	Tool   string `json:"tool" yaml:"tool"`
	Action string `json:"action,omitempty" yaml:"action"`
	// Domains are the domains of the addresses a call names.
	Domains []string `json:"domains,omitempty" yaml:"domains"`
	// Hosts are the hosts of the URLs a call names.
	Hosts []string `json:"hosts,omitempty" yaml:"hosts"`
	// Folders are the folders of the paths a call names (a file's own
	// folder, not the ones above it).
	Folders []string `json:"folders,omitempty" yaml:"folders"`
}

// Rule is one standing decision on calls within a Scope.
type Rule struct {
	// Code names the rule where a person reads it ("#r7kq"; an
	// operator's "#op1").
	Code string `json:"code" yaml:"-"`
	// Owner is the person whose calls it decides; "" for the operator's
	// rules (tools.rules), which decide everyone's.
	Owner string `json:"owner,omitempty" yaml:"-"`
	Scope `yaml:",inline"`
	// Decision is RuleAllow, RuleAsk or RuleDeny.
	Decision string `json:"decision" yaml:"decision"`
	// EvenAfterUntrusted lets an allow rule spare the question after the
	// turn read untrusted content too. Only the operator's rules may say
	// it; without it, a tainted turn still asks.
	EvenAfterUntrusted bool `json:"even_after_untrusted,omitempty" yaml:"even_after_untrusted"`
}

// Matches reports whether an allow rule of this scope covers a call of
// tool reaching r: the same tool (or "*") and action, and, for a scope
// that names any domain, host or folder, nothing unknown in the call's
// reach, at least one value of each facet the scope names, and every
// domain, host and folder the call reaches among the scope's (folders
// exactly, with their case): a rule for addresses at example.com covers
// no call that also reaches a host, or a folder, it does not name.
func (s Scope) Matches(tool string, r Reach) bool {
	if !s.sameTool(tool, r) {
		return false
	}
	if s.unscoped() {
		return true
	}
	if !r.Known() {
		return false
	}
	for _, c := range s.facets(r) {
		if len(c.rule) > 0 && len(c.call) == 0 {
			return false
		}
		for _, v := range c.call {
			if !slices.Contains(c.rule, v) {
				return false
			}
		}
	}
	return true
}

// Touches reports whether a deny or ask rule of this scope applies to a
// call of tool reaching r: the same tool and action, and a scope that
// names nothing, or any value of the call within it (a domain or host or
// one below it, a folder or one inside it). sure is false when it
// applies only because the call's reach is unknown: the call may be
// within the scope, and cannot be shown not to be.
func (s Scope) Touches(tool string, r Reach) (applies, sure bool) {
	if !s.sameTool(tool, r) {
		return false, false
	}
	if s.unscoped() {
		return true, true
	}
	for i, c := range s.facets(r) {
		for _, v := range c.call {
			for _, w := range c.rule {
				if within(v, w, i == 2) {
					return true, true
				}
			}
		}
	}
	return !r.Known(), false
}

// within reports whether v is w or below it: a subdomain of a domain or
// host, a folder inside a folder (any folder inside ".").
func within(v, w string, folder bool) bool {
	if folder {
		return v == w || w == "." || strings.HasPrefix(v, w+"/")
	}
	return v == w || strings.HasSuffix(v, "."+w)
}

func (s Scope) sameTool(tool string, r Reach) bool {
	return (s.Tool == tool || s.Tool == "*") && (s.Action == "" || s.Action == r.Action)
}

func (s Scope) unscoped() bool { return len(s.Domains)+len(s.Hosts)+len(s.Folders) == 0 }

// facets pairs each list of the scope with the call's: domains, hosts,
// folders.
func (s Scope) facets(r Reach) [3]struct{ rule, call []string } {
	return [3]struct{ rule, call []string }{{s.Domains, r.Domains}, {s.Hosts, r.Hosts}, {s.Folders, r.Folders}}
}

// String is the scope as a person reads it before taking it: "gmail_send
// to addresses at example.com".
func (s Scope) String() string {
	var b strings.Builder
	if s.Tool == "*" {
		b.WriteString("every tool")
	} else {
		b.WriteString(s.Tool)
	}
	if s.Action != "" {
		fmt.Fprintf(&b, " (%s)", s.Action)
	}
	if len(s.Domains) > 0 {
		fmt.Fprintf(&b, " to addresses at %s", orList(s.Domains))
	}
	if len(s.Hosts) > 0 {
		fmt.Fprintf(&b, " reaching %s", orList(s.Hosts))
	}
	if len(s.Folders) > 0 {
		fmt.Fprintf(&b, " in the folder %s", orList(s.Folders))
	}
	return b.String()
}

func orList(vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}

// Offer is the scope an "Always allow" for a call of d reaching r would
// take: the narrowest useful one, every domain, host and folder the call
// reaches, with its action, so that a later call is covered only within
// all of them. A call whose reach is unknown gets no scoped offer, and a
// call that reaches nothing the tool (and action) only when it is not
// destructive: a button never allows a tool that sends, deletes or
// shares everywhere (ok false).
func Offer(d Definition, e Effect, r Reach) (Scope, bool) {
	s := Scope{Tool: d.Name, Action: r.Action,
		Domains: slices.Clone(r.Domains), Hosts: slices.Clone(r.Hosts), Folders: slices.Clone(r.Folders)}
	switch {
	case !r.Known():
		if e >= EffectDestructive {
			return Scope{}, false
		}
		s.Domains, s.Hosts, s.Folders = nil, nil, nil
	case s.unscoped() && e >= EffectDestructive:
		return Scope{}, false
	}
	slices.Sort(s.Domains)
	slices.Sort(s.Hosts)
	slices.Sort(s.Folders)
	return s, true
}

// Judge is the strongest decision of the rules that apply to a call of
// tool reaching r, and the rule that made it: deny over ask over allow;
// at equal strength the operator's rule over a person's. An allow rule
// applies when it covers the call (Scope.Matches); a deny or ask rule
// when the call may reach within its scope (Scope.Touches), and a deny
// that applies only because the call's reach is unknown asks instead
// (the rule returned says ask). ok is false when no rule applies.
func Judge(rules []Rule, tool string, r Reach) (Rule, bool) {
	var best Rule
	found := false
	for _, rule := range rules {
		if rule.Decision == RuleAllow {
			if !rule.Matches(tool, r) {
				continue
			}
		} else {
			applies, sure := rule.Touches(tool, r)
			if !applies {
				continue
			}
			if !sure {
				rule.Decision = RuleAsk
			}
		}
		if !found || strength(rule) > strength(best) {
			best, found = rule, true
		}
	}
	return best, found
}

// strength orders rules: the decision first, then the operator's over a
// person's.
func strength(r Rule) int {
	n := 0
	switch r.Decision {
	case RuleAsk:
		n = 2
	case RuleDeny:
		n = 4
	}
	if r.Owner == "" {
		n++
	}
	return n
}

// OperatorRules checks the operator's rules (tools.rules), reporting one
// that cannot work by its key (tools.rules[i]), and returns them ready
// to judge calls: domains and hosts as NormalHost writes them, folders
// cleaned with their case kept, each with its code ("op1", …).
func OperatorRules(in []Rule) ([]Rule, error) {
	rules := make([]Rule, len(in))
	for i := range in {
		r := &rules[i]
		*r = in[i]
		r.Domains, r.Hosts, r.Folders = slices.Clone(r.Domains), slices.Clone(r.Hosts), slices.Clone(r.Folders)
		key := fmt.Sprintf("tools.rules[%d]", i)
		switch r.Decision {
		case RuleAllow, RuleAsk, RuleDeny:
		default:
			return nil, fmt.Errorf("%s.decision: must be allow, ask or deny, got %q", key, r.Decision)
		}
		if r.Tool = strings.TrimSpace(r.Tool); r.Tool == "" {
			return nil, fmt.Errorf("%s.tool: name a tool, or \"*\" for every tool", key)
		}
		if r.Tool == "*" && r.Decision == RuleAllow && len(r.Domains)+len(r.Hosts)+len(r.Folders) == 0 {
			return nil, fmt.Errorf("%s: an allow rule for every tool must name domains, hosts or folders", key)
		}
		if r.EvenAfterUntrusted && r.Decision != RuleAllow {
			return nil, fmt.Errorf("%s.even_after_untrusted: only an allow rule may say it", key)
		}
		r.Action = strings.ToLower(strings.TrimSpace(r.Action))
		for _, l := range []*[]string{&r.Domains, &r.Hosts} {
			for j, v := range *l {
				(*l)[j] = NormalHost(v)
			}
		}
		for j, v := range r.Folders {
			r.Folders[j] = folderOf(path.Clean("/" + strings.TrimSpace(v)))
		}
		r.Code = fmt.Sprintf("op%d", i+1)
		r.Owner = ""
	}
	return rules, nil
}

// SamplingRuleTool is the tool a person's rule names when it lets an MCP
// server use the model for them (Scope.Action is the server's name). It
// is no tool's name: the registry refuses it, so such a rule never
// allows a call.
const SamplingRuleTool = "mcp_sampling"

// codeAlphabet spells the codes people type (a rule's, an approval's):
// lower-case letters and digits without the ones people confuse (l, 1,
// o, 0).
const codeAlphabet = "abcdefghijkmnpqrstuvwxyz23456789"

// RandomCode is n random characters of the codes' alphabet: 5 bits
// each.
func RandomCode(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b)
}

// NewRuleCode is a fresh random code of four characters for a person's
// rule.
func NewRuleCode() string { return RandomCode(4) }
