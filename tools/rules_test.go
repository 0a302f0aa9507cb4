package tools

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// randomCall is a call's arguments built from a few recipients, URLs and
// paths drawn from small pools, so that calls share some values and not
// others. Recipients come in every form net/mail reads (the parser the
// sending code uses): quoted local parts, an '=' before the '@', address
// literals, a bare host, display names that look like addresses, groups,
// comments, a trailing dot, IDNA, letter case.
func randomCall(rng *rand.Rand) string {
	domains := []string{"example.com", "example.org", "evil.example", "EXAMPLE.com", "sub.example.com"}
	hosts := []string{"api.example.com", "example.org", "evil.example", "10.0.0.1", "API.example.com."}
	folders := []string{"reports", "reports/2026", "private", "", "REPORTS"}
	forms := []string{
		"p%d@%s",
		`"p%d"@%s`,
		"p%d=@%s",
		"p%d@[192.0.2.7]%.0s",
		"p%d@localhost%.0s",
		`"Ana, p%d" <ana@%s>`,
		`"bob@example.com" <p%d@%s>`,
		"team: p%d@%s, eve@evil.example;",
		"p%d@%s (a comment)",
		"<p%d@%s>",
		"p%d@%s.",
		"p%d@bücher.example%.0s",
		"p%d@xn--bcher-kva.example%.0s",
	}
	args := map[string]any{}
	if rng.IntN(2) == 0 {
		args["action"] = []string{"send", "delete", "create"}[rng.IntN(3)]
	}
	var to []string
	for range rng.IntN(3) {
		form := forms[0]
		if rng.IntN(3) == 0 {
			form = forms[rng.IntN(len(forms))]
		}
		to = append(to, fmt.Sprintf(form, rng.IntN(9), domains[rng.IntN(len(domains))]))
	}
	if len(to) > 0 {
		args["to"] = strings.Join(to, ", ")
	}
	switch rng.IntN(4) {
	case 0:
		args["body"] = fmt.Sprintf("see https://%s/x and write to z@%s", hosts[rng.IntN(len(hosts))], domains[rng.IntN(len(domains))])
	case 1:
		args["note"] = fmt.Sprintf("z@%s", domains[rng.IntN(len(domains))])
	}
	if rng.IntN(2) == 0 {
		args["url"] = "https://" + hosts[rng.IntN(len(hosts))] + "/p"
	}
	if rng.IntN(3) == 0 {
		args["endpoint"] = hosts[rng.IntN(len(hosts))]
	}
	if rng.IntN(2) == 0 {
		args["path"] = folders[rng.IntN(len(folders))] + "/f.txt"
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// sentTo is every domain a call's strings send to as net/mail reads
// them, and every host of a string that is a URL: what a tool reading
// its arguments with the standard parsers would reach.
func sentTo(args string) (domains, hosts []string) {
	var m map[string]any
	_ = json.Unmarshal([]byte(args), &m)
	for k, v := range m {
		s, _ := v.(string)
		if list, err := mail.ParseAddressList(s); err == nil {
			for _, a := range list {
				domains = append(domains, NormalHost(a.Address[strings.LastIndex(a.Address, "@")+1:]))
			}
		}
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			hosts = append(hosts, NormalHost(u.Hostname()))
		} else if k == "endpoint" {
			hosts = append(hosts, NormalHost(s))
		}
	}
	return domains, hosts
}

// TEST (property, finding: a recipient the pattern could not read let a
// domain-scoped rule send elsewhere): no allow rule an "Always allow"
// offers covers a call outside the scope it showed: whenever a rule made
// from one random call covers another, the other is the same tool and
// action, each of its values of every facet the scope names is one the
// scope's text shows, and every domain any of its strings sends to as
// net/mail reads it, and every host of its URLs, is in the scope.
func TestAnOfferedRuleNeverMatchesOutsideItsShownScope(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	defs := []Definition{{Name: "mail_send", Effect: EffectDestructive}, {Name: "files_write", Effect: EffectMutate}, {Name: "web_post", Effect: EffectDestructive}}
	matched := 0
	for range 4000 {
		d := defs[rng.IntN(len(defs))]
		a := ReachOfJSON(randomCall(rng))
		s, ok := Offer(d, d.Effect, a)
		if !ok {
			continue
		}
		shown := s.String()
		for range 20 {
			tool := defs[rng.IntN(len(defs))].Name
			call := randomCall(rng)
			b := ReachOfJSON(call)
			if !s.Matches(tool, b) {
				continue
			}
			matched++
			if tool != s.Tool || (s.Action != "" && b.Action != s.Action) {
				t.Fatalf("%q matched a call of %s (%+v)", shown, tool, b)
			}
			if s.unscoped() {
				continue
			}
			for _, f := range []struct {
				named bool
				call  []string
			}{{len(s.Domains) > 0, b.Domains}, {len(s.Hosts) > 0, b.Hosts}, {len(s.Folders) > 0, b.Folders}} {
				if !f.named {
					continue
				}
				if len(f.call) == 0 {
					t.Fatalf("%q matched a call with no value for a facet it names: %+v", shown, b)
				}
				for _, v := range f.call {
					if !strings.Contains(shown, v) {
						t.Fatalf("%q matched a call reaching %q, which it does not show", shown, v)
					}
				}
			}
			domains, hosts := sentTo(call)
			for _, v := range domains {
				if !slices.Contains(s.Domains, v) {
					t.Fatalf("%q matched %s, which sends to %s", shown, call, v)
				}
			}
			for _, v := range hosts {
				if !slices.Contains(s.Hosts, v) {
					t.Fatalf("%q matched %s, which reaches %s", shown, call, v)
				}
			}
		}
	}
	if matched < 100 {
		t.Fatalf("only %d matches: the property was hardly tried", matched)
	}
}

// TEST: the button never offers a destructive tool everywhere: an offer
// for a destructive call always names domains, hosts or folders.
func TestOfferNeverAllowsADestructiveToolEverywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := Definition{Name: "mail_send", Effect: EffectDestructive}
	offered, refused := 0, 0
	for range 2000 {
		f := ReachOfJSON(randomCall(rng))
		s, ok := Offer(d, EffectDestructive, f)
		if !ok {
			refused++
			continue
		}
		offered++
		if len(s.Domains)+len(s.Hosts)+len(s.Folders) == 0 {
			t.Fatalf("a whole-tool offer for a destructive call: %+v from %+v", s, f)
		}
	}
	if s, ok := Offer(Definition{Name: "note"}, EffectMutate, Reach{}); !ok || s.String() != "note" {
		t.Fatalf("a mutating call with no facets is offered %+v, %v", s, ok)
	}
	if offered == 0 || refused == 0 {
		t.Fatalf("offered %d, refused %d: both cases should occur", offered, refused)
	}
}

// TEST: an open tool's reach reads addresses as net/mail does and URLs
// whole, IDNA-normalised and lower-cased, once each, folders with their
// case, and calls anything address-like or URL-like it cannot read whole
// an unknown reach.
func TestReachOfJSON(t *testing.T) {
	r := ReachOfJSON(`{"action":"Send","to":"Ana <ana@Example.com>, bob@example.com","cc":["eve@evil.example"],"link":"https://API.example.org/x?y=1","host":"bücher.example","path":"Reports/2026/q1.pdf","folder":"/Team/"}`)
	if r.Action != "send" || !slices.Equal(r.Domains, []string{"evil.example", "example.com"}) ||
		!slices.Equal(r.Hosts, []string{"api.example.org", "xn--bcher-kva.example"}) || !r.Known() {
		t.Fatalf("reach = %+v", r)
	}
	if !slices.Equal(r.Folders, []string{"Reports/2026", "Team"}) {
		t.Fatalf("folders = %v", r.Folders)
	}
	for _, args := range []string{
		`{"body":"write to bob@example.com and \"eve\"@evil.example"}`,
		`{"to":"bob@example.com; eve@evil.example"}`,
		`{"note":"see https://example.com/a and https://evil.example/b"}`,
		`{"to":"mailto:eve@evil.example"}`,
		`{"write to eve@evil.example":"x"}`,
		`{"url":"https://example.com/a://b"}`,
		`not json`,
	} {
		if r := ReachOfJSON(args); r.Known() {
			t.Errorf("%s: reach %+v is known", args, r)
		}
	}
	// What a pattern finds in text that does not read whole still counts
	// for deny and ask rules.
	r = ReachOfJSON(`{"body":"write to bob@example.com and \"eve\"@evil.example"}`)
	if !slices.Contains(r.Domains, "example.com") {
		t.Fatalf("reach of prose = %+v", r)
	}
}

// TEST (finding: a deny rule for one domain was passed by adding a
// recipient at another): a deny or ask rule applies to a call that
// reaches anything within its scope (a subdomain, a folder inside),
// and to one whose reach is unknown, which it then asks rather than
// refuses; an allow rule covers neither.
func TestDenyAndAskRulesApplyToAnyValueWithin(t *testing.T) {
	deny := Rule{Code: "op1", Scope: Scope{Tool: "*", Domains: []string{"evil.example"}, Folders: []string{"secret"}}, Decision: RuleDeny}
	allow := Rule{Code: "op2", Scope: Scope{Tool: "*", Domains: []string{"example.com"}}, Decision: RuleAllow}
	for _, tc := range []struct {
		args string
		want string
	}{
		{`{"to":"bob@example.com, eve@evil.example"}`, RuleDeny},
		{`{"to":"bob@example.com, eve@mx.evil.example"}`, RuleDeny},
		{`{"to":"bob@example.com", "path":"secret/deep/x.txt"}`, RuleDeny},
		{`{"to":"bob@example.com", "path":"SECRET/x.txt"}`, ""},
		{`{"to":"bob@example.com"}`, RuleAllow},
		{`{"to":"bob@example.com, \"eve\" at evil.example <x"}`, RuleAsk},
	} {
		r, ok := Judge([]Rule{deny, allow}, "mail_send", ReachOfJSON(tc.args))
		if ok != (tc.want != "") || r.Decision != tc.want {
			t.Errorf("%s: %+v, %v; want %s", tc.args, r, ok, tc.want)
		}
	}
}

// TEST (finding: folder rules folded case, so a rule for reports covered
// REPORTS/): folders are compared with their case, in a person's rule
// and in an operator's.
func TestFoldersKeepTheirCase(t *testing.T) {
	op, err := OperatorRules([]Rule{{Scope: Scope{Tool: "files", Folders: []string{"/reports/"}}, Decision: RuleAllow}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Scope{op[0].Scope, {Tool: "files", Folders: []string{"reports"}}} {
		if !s.Matches("files", ReachOfJSON(`{"path":"reports/q1.txt"}`)) {
			t.Errorf("%s does not cover reports/q1.txt", s)
		}
		if s.Matches("files", ReachOfJSON(`{"path":"REPORTS/q1.txt"}`)) {
			t.Errorf("%s covers REPORTS/q1.txt", s)
		}
	}
}

// TEST: the strongest matching rule decides: deny over ask over allow,
// the operator's over a person's at equal strength.
func TestJudgeOrder(t *testing.T) {
	f := Reach{Domains: []string{"example.com"}}
	allow := Rule{Code: "a", Owner: "u", Scope: Scope{Tool: "mail_send"}, Decision: RuleAllow}
	ask := Rule{Code: "op1", Scope: Scope{Tool: "mail_send"}, Decision: RuleAsk}
	deny := Rule{Code: "op2", Scope: Scope{Tool: "*", Domains: []string{"example.com"}}, Decision: RuleDeny}
	if r, _ := Judge([]Rule{allow, ask}, "mail_send", f); r.Code != "op1" {
		t.Fatalf("allow+ask = %s", r.Code)
	}
	if r, _ := Judge([]Rule{deny, allow, ask}, "mail_send", f); r.Code != "op2" {
		t.Fatalf("deny = %s", r.Code)
	}
	if _, ok := Judge([]Rule{deny}, "mail_send", Reach{}); ok {
		t.Fatal("a rule naming domains matched a call with none")
	}
}

// TEST: a bad operator rule is refused naming its key.
func TestOperatorRulesCheck(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		key  string
	}{
		{Rule{Scope: Scope{Tool: "x"}, Decision: "maybe"}, "tools.rules[0].decision"},
		{Rule{Decision: RuleDeny}, "tools.rules[0].tool"},
		{Rule{Scope: Scope{Tool: "*"}, Decision: RuleAllow}, "tools.rules[0]: an allow rule for every tool"},
		{Rule{Scope: Scope{Tool: "x"}, Decision: RuleDeny, EvenAfterUntrusted: true}, "tools.rules[0].even_after_untrusted"},
	} {
		if _, err := OperatorRules([]Rule{tc.rule}); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%+v: %v", tc.rule, err)
		}
	}
}
