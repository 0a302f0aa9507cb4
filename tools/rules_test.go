package tools

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomCall is a call's arguments built from a few recipients, URLs and
// paths drawn from small pools, so that calls share some values and not
// others.
func randomCall(rng *rand.Rand) string {
	domains := []string{"example.com", "example.org", "evil.example", "EXAMPLE.com", "sub.example.com"}
	hosts := []string{"api.example.com", "example.org", "evil.example", "10.0.0.1"}
	folders := []string{"reports", "reports/2026", "private", ""}
	args := map[string]any{}
	if rng.IntN(2) == 0 {
		args["action"] = []string{"send", "delete", "create"}[rng.IntN(3)]
	}
	var to []string
	for range rng.IntN(3) {
		to = append(to, fmt.Sprintf("p%d@%s", rng.IntN(9), domains[rng.IntN(len(domains))]))
	}
	if len(to) > 0 {
		args["to"] = strings.Join(to, ", ")
	}
	if rng.IntN(2) == 0 {
		args["body"] = fmt.Sprintf("see https://%s/x and write to z@%s", hosts[rng.IntN(len(hosts))], domains[rng.IntN(len(domains))])
	}
	if rng.IntN(2) == 0 {
		args["url"] = "https://" + hosts[rng.IntN(len(hosts))] + "/p"
	}
	if rng.IntN(2) == 0 {
		args["path"] = folders[rng.IntN(len(folders))] + "/f.txt"
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// TEST (property): no allow rule an "Always allow" offers matches a call
// outside the scope it showed: whenever a rule made from one random call
// covers another, the other is the same tool and action, and each of its
// values of every facet the scope names is one the scope's text shows.
func TestAnOfferedRuleNeverMatchesOutsideItsShownScope(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	defs := []Definition{{Name: "mail_send", Effect: EffectDestructive}, {Name: "files_write", Effect: EffectMutate}, {Name: "web_post", Effect: EffectDestructive}}
	matched := 0
	for range 4000 {
		d := defs[rng.IntN(len(defs))]
		a := FacetsOf(randomCall(rng))
		s, ok := Offer(d, d.Effect, a)
		if !ok {
			continue
		}
		shown := s.String()
		for range 20 {
			tool := defs[rng.IntN(len(defs))].Name
			b := FacetsOf(randomCall(rng))
			if !s.Matches(tool, b) {
				continue
			}
			matched++
			if tool != s.Tool || (s.Action != "" && b.Action != s.Action) {
				t.Fatalf("%q matched a call of %s (%+v)", shown, tool, b)
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
		f := FacetsOf(randomCall(rng))
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
	if s, ok := Offer(Definition{Name: "note"}, EffectMutate, Facets{}); !ok || s.String() != "note" {
		t.Fatalf("a mutating call with no facets is offered %+v, %v", s, ok)
	}
	if offered == 0 || refused == 0 {
		t.Fatalf("offered %d, refused %d: both cases should occur", offered, refused)
	}
}

// TEST: facets read addresses and URLs anywhere in the arguments,
// lower-cased and once each, and folders from path arguments.
func TestFacetsOf(t *testing.T) {
	f := FacetsOf(`{"action":"Send","to":"Ana <ana@Example.com>, bob@example.com","cc":["eve@evil.example"],"body":"https://API.example.org/x?y=1","path":"reports/2026/q1.pdf","folder":"/Team/"}`)
	if f.Action != "send" || !slices.Equal(f.Domains, []string{"evil.example", "example.com"}) ||
		!slices.Equal(f.Hosts, []string{"api.example.org"}) {
		t.Fatalf("facets = %+v", f)
	}
	if !slices.Equal(f.Folders, []string{"reports/2026", "team"}) {
		t.Fatalf("folders = %v", f.Folders)
	}
}

// TEST: the strongest matching rule decides: deny over ask over allow,
// the operator's over a person's at equal strength.
func TestJudgeOrder(t *testing.T) {
	f := Facets{Domains: []string{"example.com"}}
	allow := Rule{Code: "a", Owner: "u", Scope: Scope{Tool: "mail_send"}, Decision: RuleAllow}
	ask := Rule{Code: "op1", Scope: Scope{Tool: "mail_send"}, Decision: RuleAsk}
	deny := Rule{Code: "op2", Scope: Scope{Tool: "*", Domains: []string{"example.com"}}, Decision: RuleDeny}
	if r, _ := Judge([]Rule{allow, ask}, "mail_send", f); r.Code != "op1" {
		t.Fatalf("allow+ask = %s", r.Code)
	}
	if r, _ := Judge([]Rule{deny, allow, ask}, "mail_send", f); r.Code != "op2" {
		t.Fatalf("deny = %s", r.Code)
	}
	if _, ok := Judge([]Rule{deny}, "mail_send", Facets{}); ok {
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
