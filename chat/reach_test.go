package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/store/storetest"
	"loadout/tools"
)

// otherDomainForms are recipient lists that net/mail, which sending code
// uses, reads as mail to bob@example.com and to someone elsewhere.
var otherDomainForms = []string{
	`bob@example.com, "eve"@evil.example`,
	`bob@example.com, eve=@evil.example`,
	`bob@example.com, eve@[192.0.2.7]`,
	`bob@example.com, eve@localhost`,
	`bob@example.com, "bob@example.com" <eve@evil.example>`,
	`friends: bob@example.com, eve@evil.example;`,
	`bob@example.com, eve@bücher.example`,
}

// notifyTool is an open tool (built like a manifest's or an MCP
// server's: its arguments as JSON) that sends a message to addresses.
func notifyTool(o *outbox) tools.Tool {
	return tools.Raw(tools.Definition{Name: "notify_send", Description: "Send a notification", Effect: tools.EffectDestructive,
		Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"message":{"type":"string"}},"required":["to","message"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			o.add("notify " + string(args))
			return "sent", nil
		})
}

// TEST (finding: a recipient the address pattern could not read added no
// domain, so a rule for example.com let mail go elsewhere): after "Always
// allow" on a mail to example.com, by a typed tool (mail_send) and by an
// open one (notify_send), a call that also reaches another domain in
// any form net/mail reads is asked, and nothing is sent; the same
// domain alone still runs unasked.
func TestAlwaysAllowCoversNoOtherDomainInAnyForm(t *testing.T) {
	for _, tc := range []struct {
		tool string
		args func(to string) string
	}{
		{"mail_send", func(to string) string {
			b, _ := json.Marshal(map[string]string{"to": to, "subject": "Hello", "body": "hi"})
			return string(b)
		}},
		{"notify_send", func(to string) string {
			b, _ := json.Marshal(map[string]string{"to": to, "message": "hi"})
			return string(b)
		}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			o := &outbox{}
			e := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
				if err := confirmTools(o)(r); err != nil {
					return err
				}
				return r.Add(notifyTool(o))
			}})
			in := chat.Inbound{ChatKey: "c1", UserKey: "u:ana", Text: "tell Ana", ID: "ev1"}
			e.Model.Call(tc.tool, tc.args("ana@example.com"))
			e.Model.Text("Done.")
			r := handle(t, e, in)
			if len(r.Asks) != 1 || r.Asks[0].Always != tc.tool+" to addresses at example.com" {
				t.Fatalf("question = %+v", r)
			}
			if got := always(t, e, "u:ana", r.Ask, "ev2"); got.Text != "Done." || len(o.all()) != 1 {
				t.Fatalf("always = %+v, sent %v", got, o.all())
			}
			for i, to := range otherDomainForms {
				e.Model.Call(tc.tool, tc.args(to))
				in.Text, in.ID = "tell them", fmt.Sprintf("ev-form-%d", i)
				r := handle(t, e, in)
				if r.Ask == "" || len(o.all()) != 1 {
					t.Fatalf("%s: ran within the rule for example.com: %+v, sent %v", to, r, o.all())
				}
				if _, err := e.Engine.Clear(context.Background(), "c1"); err != nil {
					t.Fatal(err)
				}
			}
			e.Model.Call(tc.tool, tc.args("Bob <bob@example.com>"))
			e.Model.Text("Done.")
			in.Text, in.ID = "tell Bob", "ev-bob"
			if r := handle(t, e, in); r.Ask != "" || len(o.all()) != 2 {
				t.Fatalf("within the rule = %+v, sent %v", r, o.all())
			}
		})
	}
}

// TEST (finding: a deny rule for one domain was passed by naming a
// recipient at another too): an operator's deny rule for evil.example
// refuses a mail that also goes there, in any form; a recipient list
// nobody can read whole is asked, never allowed by the allow rule.
func TestOperatorDenyHoldsWhateverElseACallReaches(t *testing.T) {
	o := &outbox{}
	rules, err := tools.OperatorRules([]tools.Rule{
		{Scope: tools.Scope{Tool: "*", Domains: []string{"evil.example"}}, Decision: tools.RuleDeny},
		{Scope: tools.Scope{Tool: "notify_send", Domains: []string{"example.com"}}, Decision: tools.RuleAllow},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := storetest.NewEnv(t, storetest.Options{Config: chat.Config{Rules: rules}, Register: func(r *tools.Registry) error {
		return r.Add(notifyTool(o))
	}})
	in := chat.Inbound{ChatKey: "c1", UserKey: "u:ana"}
	for i, to := range []string{`bob@example.com, eve@evil.example`, `bob@example.com, "eve"@MX.Evil.Example`} {
		e.Model.Call("notify_send", fmt.Sprintf(`{"to":%q,"message":"hi"}`, to))
		e.Model.Text("Done.")
		in.Text, in.ID = "tell them", fmt.Sprintf("ev%d", i)
		handle(t, e, in)
		if len(o.all()) != 0 {
			t.Fatalf("%s: sent %v", to, o.all())
		}
		last := lastToolResult(t, e)
		if !strings.Contains(last, "denied_by_rule") {
			t.Fatalf("%s: result %s", to, last)
		}
	}
	e.Model.Call("notify_send", `{"to":"bob@example.com","message":"write to bob@example.com or to eve (at) evil (dot) example"}`)
	in.Text, in.ID = "tell Bob", "ev-prose"
	if r := handle(t, e, in); r.Ask == "" || len(o.all()) != 0 {
		t.Fatalf("prose naming another domain = %+v, sent %v", r, o.all())
	}
}

// lastToolResult is the newest tool result of chat c1's open session.
func lastToolResult(t *testing.T, e *storetest.Env) string {
	t.Helper()
	sess, err := e.Store.OpenSession(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := e.Store.Recent(context.Background(), sess.ID, 20)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == chat.RoleTool {
			return msgs[i].Text
		}
	}
	return ""
}

// TEST (mutations: a person's rule kept in the database that allows a
// destructive tool with no scope; a person's rule over
// tools.confirm_tools: always): neither spares the question.
func TestAPersonsRuleCannotLiftWhatItMayNot(t *testing.T) {
	o := &outbox{}
	cfg := chat.Config{Confirm: tools.Policy{Tools: map[string]string{"mail_label": tools.ConfirmAlways}}}
	e := storetest.NewEnv(t, storetest.Options{Config: cfg, Register: confirmTools(o)})
	for _, r := range []tools.Rule{
		{Code: "hand", Owner: "u:ana", Scope: tools.Scope{Tool: "mail_send"}, Decision: tools.RuleAllow},
		{Code: "lbl1", Owner: "u:ana", Scope: tools.Scope{Tool: "mail_label"}, Decision: tools.RuleAllow},
	} {
		if err := e.Store.AddRule(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	in := chat.Inbound{ChatKey: "c1", UserKey: "u:ana", Text: "mail Bob", ID: "ev1"}
	e.Model.Call("mail_send", `{"to":"bob@example.com","subject":"Hello","body":"hi"}`)
	if r := handle(t, e, in); r.Ask == "" || len(o.all()) != 0 {
		t.Fatalf("a destructive tool allowed everywhere by a rule from the database: %+v, sent %v", r, o.all())
	}
	if _, err := e.Engine.Clear(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	e.Model.Call("mail_label", `{"text":"done"}`)
	in.Text, in.ID = "label it", "ev2"
	if r := handle(t, e, in); r.Ask == "" || len(o.all()) != 0 {
		t.Fatalf("a person's rule lifted confirm_tools always: %+v, sent %v", r, o.all())
	}
}
