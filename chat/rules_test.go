package chat_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
)

// rulesEnv has the mail tools and the taint tools, under cfg.
func rulesEnv(t *testing.T, o *outbox, cfg chat.Config) *storetest.Env {
	return storetest.NewEnv(t, storetest.Options{Config: cfg, Register: func(r *tools.Registry) error {
		if err := confirmTools(o)(r); err != nil {
			return err
		}
		return taintTools(o, false, nil)(r)
	}})
}

func always(t *testing.T, e *storetest.Env, user, id, event string) chat.Reply {
	t.Helper()
	r, err := e.Engine.Always(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: user, ID: event}, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func auditLog(t *testing.T, e *storetest.Env, user string) []chat.AuditEntry {
	t.Helper()
	entries, err := e.Store.AuditLog(context.Background(), "c1", user, 50)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// TEST: "Always allow" shows its scope with the question before it is
// taken, and takes exactly that scope: the next mail to the same domain
// runs without a question (recorded as allowed by the rule), a mail that
// also goes elsewhere still asks, and so does the same mail after the
// turn read untrusted content. /rules lists the rule; removing it brings
// the question back.
func TestAlwaysAllowKeepsARuleOfTheShownScope(t *testing.T) {
	o := &outbox{}
	e := rulesEnv(t, o, chat.Config{})
	ana := chat.Inbound{ChatKey: "c1", UserKey: "u:ana"}
	e.Model.Call("mail_send", sendArgs)
	e.Model.Text("Sent.")
	in := ana
	in.Text, in.ID = "send Ana the invoice", "ev1"
	r := handle(t, e, in)
	if len(r.Asks) != 1 || r.Asks[0].Always != "mail_send to addresses at example.com" ||
		!strings.Contains(r.Text, "without asking from now on: mail_send to addresses at example.com") {
		t.Fatalf("question = %+v", r)
	}
	if got := always(t, e, "u:ana", r.Ask, "ev2"); got.Text != "Sent." || len(o.all()) != 1 {
		t.Fatalf("always = %+v, sent %v", got, o.all())
	}

	// The same domain: no question.
	e.Model.Call("mail_send", `{"to":"bob@example.com","subject":"Hello","body":"hi"}`)
	e.Model.Text("Sent to Bob.")
	in.Text, in.ID = "mail Bob", "ev3"
	if r := handle(t, e, in); r.Ask != "" || len(o.all()) != 2 {
		t.Fatalf("within the rule = %+v, sent %v", r, o.all())
	}
	entries := auditLog(t, e, "u:ana")
	if len(entries) != 2 || entries[0].Decision != chat.AuditAllowedByRule || entries[0].Rule == "" || entries[0].Outcome != "ran" ||
		entries[1].Decision != chat.AuditApproved || entries[1].DecidedBy != "u:ana" {
		t.Fatalf("audit = %+v", entries)
	}
	code := entries[0].Rule

	// Another domain among the recipients: asked.
	e.Model.Call("mail_send", `{"to":"bob@example.com, eve@evil.example","subject":"Hello","body":"hi"}`)
	in.Text, in.ID = "mail Bob and Eve", "ev4"
	if r := handle(t, e, in); r.Ask == "" || len(o.all()) != 2 {
		t.Fatalf("outside the rule = %+v, sent %v", r, o.all())
	}
	if _, err := e.Engine.Clear(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}

	// After untrusted content in the turn: asked, rule or not.
	e.Model.Call("fetch", `{"text":"https://news.example.org"}`)
	e.Model.Call("mail_send", `{"to":"bob@example.com","subject":"News","body":"see"}`)
	in.Text, in.ID = "read the news and mail Bob", "ev5"
	if r := handle(t, e, in); r.Ask == "" || len(o.all()) != 2 {
		t.Fatalf("after untrusted content = %+v, sent %v", r, o.all())
	}
	if _, err := e.Engine.Clear(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}

	list, err := e.Engine.RulesText(context.Background(), ana)
	if err != nil || !strings.Contains(list, "#"+code+" — allow mail_send to addresses at example.com") {
		t.Fatalf("/rules = %q, %v", list, err)
	}
	if got, _ := e.Engine.RemoveRule(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: "u:bea"}, "#"+code); !strings.Contains(got, "no rule") {
		t.Fatalf("another person removed it: %q", got)
	}
	if got, _ := e.Engine.RemoveRule(context.Background(), ana, "#"+code); !strings.Contains(got, "Removed rule #"+code) {
		t.Fatalf("remove = %q", got)
	}
	e.Model.Call("mail_send", `{"to":"bob@example.com","subject":"Again","body":"hi"}`)
	in.Text, in.ID = "mail Bob again", "ev6"
	if r := handle(t, e, in); r.Ask == "" || len(o.all()) != 2 {
		t.Fatalf("after removing the rule = %+v, sent %v", r, o.all())
	}
}

// TEST: a destructive call that reaches nothing narrower than its tool
// gets no "Always allow", and /always on it approves nothing.
func TestDestructiveCallWithNoNarrowScopeGetsNoAlways(t *testing.T) {
	o := &outbox{}
	e := rulesEnv(t, o, chat.Config{})
	e.Model.Call("post", `{"text":"hello"}`)
	r := handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "post it", ID: "ev1"})
	if r.Ask == "" || r.Asks[0].Always != "" || strings.Contains(r.Text, "Always allow") {
		t.Fatalf("question = %+v", r)
	}
	if got := always(t, e, "u", r.Ask, "ev2"); !strings.Contains(got.Text, "cannot be always allowed") || len(o.all()) != 0 {
		t.Fatalf("always = %+v, ran %v", got, o.all())
	}
	rules, err := e.Store.Rules(context.Background(), "u")
	if err != nil || len(rules) != 0 {
		t.Fatalf("rules = %v, %v", rules, err)
	}
}

// TEST: the operator's rules (tools.rules) decide everyone's calls, deny
// over ask over allow: a deny is refused with its own code, which the
// model reads, and recorded; an ask holds even a call the policy lets
// through; a person's own allow cannot loosen an operator's ask; only an
// operator's allow that says even_after_untrusted lifts the question
// after untrusted content.
func TestOperatorRules(t *testing.T) {
	ops, err := tools.OperatorRules([]tools.Rule{
		{Scope: tools.Scope{Tool: "mail_send", Domains: []string{"evil.example"}}, Decision: tools.RuleDeny},
		{Scope: tools.Scope{Tool: "mail_read"}, Decision: tools.RuleAsk},
		{Scope: tools.Scope{Tool: "note"}, Decision: tools.RuleAllow, EvenAfterUntrusted: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := &outbox{}
	e := rulesEnv(t, o, chat.Config{Rules: ops})
	e.Model.Call("mail_send", `{"to":"eve@evil.example","subject":"x","body":"y"}`)
	e.Model.Text("A rule forbids it.")
	r := handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "mail Eve", ID: "ev1"})
	if r.Ask != "" || len(o.all()) != 0 {
		t.Fatalf("denied = %+v, sent %v", r, o.all())
	}
	if got := lastResult(t, e.Model.Last(t)); !strings.Contains(got, `"code":"denied_by_rule"`) || !strings.Contains(got, "#op1") {
		t.Fatalf("the model read %s", got)
	}
	if a := auditLog(t, e, ""); len(a) != 1 || a[0].Decision != chat.AuditDeniedByRule || a[0].Rule != "op1" || a[0].Outcome != "" {
		t.Fatalf("audit = %+v", a)
	}

	// A person's own allow for mail_read does not loosen the ask.
	if err := e.Store.AddRule(context.Background(), tools.Rule{Code: "mine", Owner: "u", Scope: tools.Scope{Tool: "mail_read"}, Decision: tools.RuleAllow}); err != nil {
		t.Fatal(err)
	}
	e.Model.Call("mail_read", `{"text":"inbox"}`)
	if r := handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "read my mail", ID: "ev2"}); r.Ask == "" || len(o.all()) != 0 {
		t.Fatalf("ask rule = %+v, ran %v", r, o.all())
	}
	if _, err := e.Engine.Clear(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}

	// even_after_untrusted: a note after an untrusted read runs.
	e.Model.Call("fetch", `{"text":"https://news.example.org"}`)
	e.Model.Call("note", `{"text":"the headline"}`)
	e.Model.Text("Noted.")
	if r := handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "note the headline", ID: "ev3"}); r.Ask != "" || r.Text != "Noted." {
		t.Fatalf("even after untrusted = %+v", r)
	}
	if got := o.all(); len(got) != 1 || got[0] != "note the headline" {
		t.Fatalf("ran %v", got)
	}
}

// TEST: the calls of one answer are asked together and decided one by
// one: each has its own code and runs (or not) alone; the model hears
// nothing until the last is decided, then reads each outcome once.
func TestBatchEachCallDecidedAlone(t *testing.T) {
	o := &outbox{}
	e := rulesEnv(t, o, chat.Config{})
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{
		{Name: "mail_send", Arguments: `{"to":"ana@example.com","subject":"One","body":"1"}`},
		{Name: "mail_send", Arguments: `{"to":"bob@example.org","subject":"Two","body":"2"}`},
		{Name: "post", Arguments: `{"text":"three"}`},
	}})
	e.Model.Text("One and three went; two did not.")
	r := handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "do all three", ID: "ev1"})
	if len(r.Asks) != 3 || r.Ask != r.Asks[0].ID || !strings.Contains(r.Text, "3 actions") {
		t.Fatalf("question = %+v", r)
	}
	for i, a := range r.Asks {
		if a.Text == "" || !strings.Contains(a.Text, []string{"One", "Two", "three"}[i]) {
			t.Fatalf("question %d = %+v", i, a)
		}
	}
	got := decide(t, e, "u", r.Asks[0].ID, "ev2", true)
	if !strings.Contains(got.Text, "Still waiting for your answer") || !strings.Contains(got.Text, chat.CodeOf(r.Asks[1].ID)) ||
		len(o.all()) != 1 || len(e.Model.Requests()) != 1 {
		t.Fatalf("after the first = %+v, ran %v, model asked %d times", got, o.all(), len(e.Model.Requests()))
	}
	if got := decide(t, e, "u", r.Asks[1].ID, "ev3", false); !strings.Contains(got.Text, "Denied: Send an email to bob@example.org") || len(o.all()) != 1 {
		t.Fatalf("after the second = %+v, ran %v", got, o.all())
	}
	got = decide(t, e, "u", r.Asks[2].ID, "ev4", true)
	if got.Text != "One and three went; two did not." || len(o.all()) != 2 || len(e.Model.Requests()) != 2 {
		t.Fatalf("after the last = %+v, ran %v", got, o.all())
	}
	results := chattestResults(e)
	if len(results) != 3 || !strings.Contains(results[0], "sent to ana@example.com") || !strings.Contains(results[1], `"code":"denied"`) ||
		!strings.Contains(results[2], "Thanks") {
		t.Fatalf("the model read %v", results)
	}
	if a := auditLog(t, e, "u"); len(a) != 3 || a[0].Decision != chat.AuditApproved || a[1].Decision != chat.AuditDenied || a[2].Decision != chat.AuditApproved {
		t.Fatalf("audit = %+v", a)
	}
}

// chattestResults are the tool results of the model's last request, in
// order.
func chattestResults(e *storetest.Env) []string {
	var out []string
	for _, m := range e.Model.Requests()[len(e.Model.Requests())-1].Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// TEST: the audit trail records each kind of decision once (expired,
// cancelled by /clear, approved with its outcome), with the call's
// arguments hashed; /audit shows a person their own decisions and an
// admin everyone's.
func TestAuditTrailRecordsEveryDecision(t *testing.T) {
	o := &outbox{}
	e := rulesEnv(t, o, chat.Config{ConfirmTTL: time.Minute, Admins: tools.NewAdmins([]string{"u:admin"})})
	e.Model.Call("mail_send", sendArgs)
	r := handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u:ana", Text: "send it", ID: "ev1"})
	if _, err := e.Engine.Clear(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if got := decide(t, e, "u:ana", r.Ask, "ev2", true); !strings.Contains(got.Text, "cleared") {
		t.Fatalf("after /clear = %+v", got)
	}
	e.Model.Call("post", `{"text":"hello"}`)
	e.Model.Text("Posted.")
	r = handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u:bea", Text: "post", ID: "ev3"})
	decide(t, e, "u:bea", r.Ask, "ev4", true)
	decide(t, e, "u:bea", r.Ask, "ev4", true) // the same event again: not recorded twice
	e.Model.Call("post", `{"text":"later"}`)
	r = handle(t, e, chat.Inbound{ChatKey: "c1", UserKey: "u:bea", Text: "post later", ID: "ev5"})
	if ok, err := e.Store.Decide(context.Background(), r.Ask, chat.ApprovalPending, chat.ApprovalExpired, "ev6"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got := decide(t, e, "u:bea", r.Ask, "ev6", true); !strings.Contains(got.Text, "expired") {
		t.Fatalf("expired = %+v", got)
	}

	a := auditLog(t, e, "")
	if len(a) != 3 || a[0].Decision != chat.AuditExpired || a[0].Outcome != "" ||
		a[1].Decision != chat.AuditApproved || a[1].UserKey != "u:bea" || a[1].Outcome != "ran" ||
		a[2].Decision != chat.AuditCancelled || a[2].UserKey != "u:ana" || len(a[2].ArgsHash) != 64 {
		t.Fatalf("audit = %+v", a)
	}
	mine, err := e.Engine.AuditText(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: "u:ana"})
	if err != nil || !strings.Contains(mine, "cancelled: Send an email to ana@example.com") || strings.Contains(mine, "Post") {
		t.Fatalf("/audit for Ana = %q, %v", mine, err)
	}
	all, err := e.Engine.AuditText(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: "u:admin"})
	if err != nil || !strings.Contains(all, "(asked by u:ana)") || !strings.Contains(all, "(asked by u:bea)") {
		t.Fatalf("/audit for an admin = %q, %v", all, err)
	}
}

// failingRounds fails the write of a round that holds a tool result,
// as a store that is gone at that moment would.
type failingRounds struct {
	chat.Store
	fail bool
}

func (s *failingRounds) Append(ctx context.Context, id int64, msgs []chat.Message, u chat.Usage, audit ...chat.AuditEntry) error {
	for _, m := range msgs {
		if m.Role == chat.RoleTool && s.fail {
			return errors.New("the disk is gone")
		}
	}
	return s.Store.Append(ctx, id, msgs, u, audit...)
}

// TEST: a call a rule allowed is recorded in the audit trail with its
// round, in one transaction: a round that could not be written leaves
// no decision behind it, and the round written after leaves one.
func TestRuleDecisionIsRecordedWithItsRound(t *testing.T) {
	ops, err := tools.OperatorRules([]tools.Rule{{Scope: tools.Scope{Tool: "note"}, Decision: tools.RuleAllow}})
	if err != nil {
		t.Fatal(err)
	}
	o := &outbox{}
	env := rulesEnv(t, o, chat.Config{})
	st := &failingRounds{Store: env.Store, fail: true}
	e := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Rules: ops,
		Confirm: tools.Policy{Level: tools.ConfirmMutating}}, env.Model.Client(), st, env.Registry)
	env.Model.Call("note", `{"text":"milk"}`)
	if _, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "note milk"}); err == nil {
		t.Fatal("the round was written")
	}
	if a := auditLog(t, env, ""); len(o.all()) != 1 || len(a) != 0 {
		t.Fatalf("ran %v; the audit trail holds %+v without its round", o.all(), a)
	}
	st.fail = false
	env.Model.Call("note", `{"text":"bread"}`)
	env.Model.Text("Noted.")
	if _, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "note bread"}); err != nil {
		t.Fatal(err)
	}
	if a := auditLog(t, env, ""); len(a) != 1 || a[0].Decision != chat.AuditAllowedByRule || a[0].Rule != "op1" || a[0].Outcome != "ran" {
		t.Fatalf("audit = %+v", a)
	}
}
