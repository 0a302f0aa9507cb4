package tools

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
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
// for every tool), optionally one action of it, and for each facet it
// names the values every matching call's must be among. A facet a scope
// names matches only a call that has at least one such value: a rule
// for "addresses at example.com" never covers a call to nobody.
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

// Facets are what a call reaches, read from its checked arguments: the
// values rules match on.
type Facets struct {
	Action  string
	Domains []string
	Hosts   []string
	Folders []string
}

// pathKeys name the arguments that hold a file's path; folderKeys a
// folder's.
var (
	pathKeys   = []string{"path", "paths", "file", "files", "filename", "source", "destination", "src", "dst", "from_path", "to_path"}
	folderKeys = []string{"folder", "folders", "dir", "directory"}
)

// FacetsOf reads the facets of a call from its arguments as checked and
// decoded (Input.JSON): the "action" argument; the domain of every
// address and the host of every URL anywhere in the arguments (so a rule
// for one domain never covers a call that also names another); the
// folder of every path argument. Values are lower-cased, sorted, and
// each listed once. Its cost is linear in the arguments' size, and the
// sort's in the number of values.
func FacetsOf(args string) Facets {
	var v any
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return Facets{}
	}
	var f Facets
	if m, ok := v.(map[string]any); ok {
		if a, ok := m["action"].(string); ok {
			f.Action = strings.ToLower(strings.TrimSpace(a))
		}
	}
	f.walk("", v)
	// Sorted: the walk meets an object's keys in no set order.
	slices.Sort(f.Domains)
	slices.Sort(f.Hosts)
	slices.Sort(f.Folders)
	return f
}

func (f *Facets) walk(key string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			f.walk(strings.ToLower(k), x)
		}
	case []any:
		for _, x := range v {
			f.walk(key, x)
		}
	case string:
		f.read(key, v)
	}
}

func (f *Facets) read(key, s string) {
	for _, a := range addressPattern.FindAllString(s, -1) {
		if p, err := mail.ParseAddress(a); err == nil {
			a = p.Address
		}
		if _, domain, ok := strings.Cut(a[strings.LastIndex(a, "@"):], "@"); ok {
			f.Domains = addOnce(f.Domains, strings.ToLower(domain))
		}
	}
	for _, u := range urlPattern.FindAllString(s, -1) {
		if p, err := url.Parse(u); err == nil && p.Hostname() != "" {
			f.Hosts = addOnce(f.Hosts, strings.ToLower(p.Hostname()))
		}
	}
	if strings.Contains(s, "://") {
		return
	}
	switch {
	case slices.Contains(pathKeys, key):
		f.Folders = addOnce(f.Folders, folderOf(path.Dir(path.Clean("/"+s))))
	case slices.Contains(folderKeys, key):
		f.Folders = addOnce(f.Folders, folderOf(path.Clean("/"+s)))
	}
}

// folderOf is a folder as rules name it: relative, "." for the top.
func folderOf(p string) string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return "."
	}
	return strings.ToLower(p)
}

func addOnce(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// Matches reports whether the rule covers a call of tool with facets f.
func (s Scope) Matches(tool string, f Facets) bool {
	if s.Tool != tool && s.Tool != "*" {
		return false
	}
	if s.Action != "" && s.Action != f.Action {
		return false
	}
	for _, c := range []struct{ rule, call []string }{{s.Domains, f.Domains}, {s.Hosts, f.Hosts}, {s.Folders, f.Folders}} {
		if len(c.rule) == 0 {
			continue
		}
		if len(c.call) == 0 {
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

// Offer is the scope an "Always allow" for a call of d with facets f
// would take: the narrowest useful one, the recipients' domains, else
// the hosts, else the folders, with the call's action. A call with none
// of them gets the tool (and action) only when it is not destructive;
// a destructive one gets no offer (ok false): a button never allows a
// tool that sends, deletes or shares everywhere.
func Offer(d Definition, e Effect, f Facets) (Scope, bool) {
	s := Scope{Tool: d.Name, Action: f.Action}
	switch {
	case len(f.Domains) > 0:
		s.Domains = slices.Clone(f.Domains)
	case len(f.Hosts) > 0:
		s.Hosts = slices.Clone(f.Hosts)
	case len(f.Folders) > 0:
		s.Folders = slices.Clone(f.Folders)
	case e >= EffectDestructive:
		return Scope{}, false
	}
	slices.Sort(s.Domains)
	slices.Sort(s.Hosts)
	slices.Sort(s.Folders)
	return s, true
}

// Judge is the strongest decision of the rules that cover a call of tool
// with facets f, and the rule that made it: deny over ask over allow; at
// equal strength the operator's rule over a person's. ok is false when
// no rule covers the call.
func Judge(rules []Rule, tool string, f Facets) (Rule, bool) {
	var best Rule
	found := false
	for _, r := range rules {
		if !r.Matches(tool, f) {
			continue
		}
		if !found || strength(r) > strength(best) {
			best, found = r, true
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
// to judge calls: values lower-cased, folders cleaned, each with its
// code ("op1", …).
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
		for _, l := range []*[]string{&r.Domains, &r.Hosts, &r.Folders} {
			for j, v := range *l {
				(*l)[j] = strings.ToLower(strings.TrimSpace(v))
			}
		}
		for j, v := range r.Folders {
			r.Folders[j] = folderOf(path.Clean("/" + v))
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
