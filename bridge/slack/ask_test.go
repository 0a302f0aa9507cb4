package slack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"loadout/bridge/slack/slacktest"
	"loadout/chat"
	"loadout/google/gmail"
	"loadout/google/googletest"
	"loadout/tools"

	"loadout/chat/chattest"
)

// gmailOn registers the Gmail group against a fake Google.
func gmailOn(api *googletest.API) func(r *tools.Registry) error {
	return func(r *tools.Registry) error {
		g := gmail.New(&googletest.Client{Endpoint: api.URL}, gmail.Options{})
		return r.AddGroup(g.Group, g.Tools...)
	}
}

// question finds the post carrying the approval buttons and returns its
// ts, text and the Approve button's value.
func question(t *testing.T, fake *slacktest.Server, posts []slacktest.Call) (ts, text, value string) {
	t.Helper()
	for _, p := range posts {
		var blocks []struct {
			Type     string `json:"type"`
			Elements []struct {
				ActionID string `json:"action_id"`
				Value    string `json:"value"`
			} `json:"elements"`
		}
		_ = json.Unmarshal([]byte(p.Params["blocks"]), &blocks)
		for _, b := range blocks {
			if b.Type == "actions" && len(b.Elements) >= 2 && b.Elements[0].ActionID == actionApprove && b.Elements[1].ActionID == actionDeny {
				return fake.TSOf(p.Params["channel"], p.Params["text"]), p.Params["text"], b.Elements[0].Value
			}
		}
	}
	t.Fatalf("no question with Approve and Deny among %v", posts)
	return
}

// TEST: over Socket Mode the model calls gmail_send; the fake Google sees
// no send; the owner sees the summary with Approve and Deny; another
// allowed person's press is refused privately; the owner's press sends
// exactly once, the question shows what was chosen, and the model
// answers; a second press does nothing.
func TestApprovalButtonsOverSocketMode(t *testing.T) {
	api := googletest.NewAPI(t)
	api.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"m1","threadId":"t1"}`)
	h := start(t, options{register: gmailOn(api), allowed: []string{owner, "UBEA"}})
	h.env.Model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	h.env.Model.Call("gmail_send", `{"to":"bob@example.com","subject":"Invoice","body":"Hi Bob"}`)
	h.event(t, "Ev1", slacktest.DM("D1", owner, "email Bob the invoice", "100.1"))
	posts := h.fake.WaitCalls(t, "chat.postMessage", 1)
	ts, text, value := question(t, h.fake, posts)
	if !strings.Contains(text, "Send an email to bob@example.com, subject 'Invoice', 1 line") {
		t.Fatalf("question = %q", text)
	}
	if api.Count("POST /gmail/v1/users/me/messages/send") != 0 {
		t.Fatal("sent before approval")
	}
	press := func(user string) {
		h.envelopes++
		id := fmt.Sprintf("env-press-%d", h.envelopes)
		h.fake.Send(t, id, "interactive", slacktest.BlockAction(user, "D1", "", ts, text, actionApprove, value), 0)
		h.fake.WaitAck(t, id)
	}
	press("UBEA")
	if w := h.fake.WaitCalls(t, "chat.postEphemeral", 1)[0].Params; w["user"] != "UBEA" || !strings.Contains(w["text"], "Only the person who asked") {
		t.Fatalf("refusal = %v", w)
	}
	h.env.Model.Text("Sent it to Bob.")
	press(owner)
	posts = h.fake.WaitCalls(t, "chat.postMessage", 2)
	if posts[1].Params["text"] != "Sent it to Bob." {
		t.Fatalf("answer = %v", posts[1].Params)
	}
	if n := api.Count("POST /gmail/v1/users/me/messages/send"); n != 1 {
		t.Fatalf("%d sends", n)
	}
	up := h.fake.WaitCalls(t, "chat.update", 1)[0].Params
	if up["ts"] != ts || !strings.Contains(up["blocks"], "You chose: *Approve*") || strings.Contains(up["blocks"], actionApprove) {
		t.Fatalf("question after the press = %v", up)
	}
	// A second press is refused to the presser alone, with why;
	// nothing is posted to the chat and nothing runs again.
	press(owner)
	whispers := h.fake.WaitCalls(t, "chat.postEphemeral", 2)
	if !strings.Contains(whispers[1].Params["text"], "already answered") || api.Count("POST /gmail/v1/users/me/messages/send") != 1 {
		t.Fatalf("second press = %v", whispers[1].Params)
	}
	if n := len(h.fake.Calls("chat.postMessage")); n != 2 {
		t.Fatalf("%d posts after a second press", n)
	}
}

// TEST: with the Events API the presses come to the signed interactivity
// endpoint: a bad signature is refused; Deny sends nothing and the model
// hears of it.
func TestApprovalOverTheInteractivityEndpoint(t *testing.T) {
	api := googletest.NewAPI(t)
	h := start(t, options{mode: ModeEvents, register: gmailOn(api)})
	chattest.Eventually(t, "the adapter to know its workspace", h.adapter.identified)
	e := serveEvents(t, h)
	h.env.Model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	h.env.Model.Call("gmail_send", `{"to":"bob@example.com","subject":"Invoice","body":"Hi Bob"}`)
	now := time.Now()
	dm := mustJSON(t, slacktest.Callback("EvA", slacktest.DM("D1", owner, "email Bob", "5.1")))
	e.post(t, "/slack/events", dm, slacktest.Sign(secret, now, dm))
	ts, text, value := question(t, h.fake, h.fake.WaitCalls(t, "chat.postMessage", 1))
	body := slacktest.Interactivity(slacktest.BlockAction(owner, "D1", "", ts, text, actionDeny, value))
	if resp, _ := e.post(t, "/slack/interactivity", body, slacktest.Sign("wrong", now, body)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned press: %d", resp.StatusCode)
	}
	h.env.Model.Text("OK, not sent.")
	if resp, _ := e.post(t, "/slack/interactivity", body, slacktest.Sign(secret, now, body)); resp.StatusCode != 200 {
		t.Fatalf("press: %d", resp.StatusCode)
	}
	if p := h.fake.WaitCalls(t, "chat.postMessage", 2)[1].Params; p["text"] != "OK, not sent." {
		t.Fatalf("answer = %v", p)
	}
	if api.Count("POST /gmail/v1/users/me/messages/send") != 0 {
		t.Fatal("a denied send went out")
	}
	if !hasContent(h.env.Model.Last(t).Messages, `"code":"denied"`) {
		t.Fatal("the model was not told it was denied")
	}
}

// questions are the posts carrying approval buttons, in order, each with
// its ts, text and the value and action ids of its buttons.
type slackQuestion struct {
	ts, text, value string
	actions         []string
}

func questions(fake *slacktest.Server) []slackQuestion {
	var out []slackQuestion
	for _, p := range fake.Calls("chat.postMessage") {
		var blocks []struct {
			Type     string `json:"type"`
			Elements []struct {
				ActionID string `json:"action_id"`
				Value    string `json:"value"`
			} `json:"elements"`
		}
		_ = json.Unmarshal([]byte(p.Params["blocks"]), &blocks)
		for _, b := range blocks {
			if b.Type == "actions" && len(b.Elements) >= 2 {
				q := slackQuestion{ts: fake.TSOf(p.Params["channel"], p.Params["text"]), text: p.Params["text"], value: b.Elements[0].Value}
				for _, e := range b.Elements {
					q.actions = append(q.actions, e.ActionID)
				}
				out = append(out, q)
			}
		}
	}
	return out
}

// TEST: on Slack, the two sends of one answer are asked each with its
// own buttons and decided alone; "Always allow" is a third button that
// keeps a rule for the recipients' domain, after which a send there is
// not asked; /audit lists what was decided.
func TestBatchAndAlwaysAllowOnSlack(t *testing.T) {
	api := googletest.NewAPI(t)
	api.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"m1","threadId":"t1"}`)
	h := start(t, options{register: gmailOn(api)})
	press := func(q slackQuestion, action string) {
		h.envelopes++
		id := fmt.Sprintf("env-press-%d", h.envelopes)
		h.fake.Send(t, id, "interactive", slacktest.BlockAction(owner, "D1", "", q.ts, q.text, action, q.value), 0)
		h.fake.WaitAck(t, id)
	}
	h.env.Model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	h.env.Model.Push(chattest.Step{Calls: []chat.ToolCall{
		{Name: "gmail_send", Arguments: `{"to":"bob@example.com","subject":"One","body":"1"}`},
		{Name: "gmail_send", Arguments: `{"to":"eve@example.org","subject":"Two","body":"2"}`},
	}})
	h.env.Model.Text("Bob has it; Eve does not.")
	h.event(t, "Ev1", slacktest.DM("D1", owner, "mail both", "100.1"))
	h.fake.WaitCalls(t, "chat.postMessage", 3)
	qs := questions(h.fake)
	if len(qs) != 2 || !strings.Contains(qs[0].text, "1 of 2") || !strings.Contains(qs[1].text, "2 of 2") ||
		len(qs[0].actions) != 3 || qs[0].actions[2] != actionAlways {
		t.Fatalf("questions = %+v", qs)
	}
	press(qs[0], actionApprove)
	h.fake.WaitCalls(t, "chat.postMessage", 4)
	press(qs[1], actionDeny)
	posts := h.fake.WaitCalls(t, "chat.postMessage", 5)
	if posts[4].Params["text"] != "Bob has it; Eve does not." || api.Count("POST /gmail/v1/users/me/messages/send") != 1 {
		t.Fatalf("answer %v, %d sends", posts[4].Params, api.Count("POST /gmail/v1/users/me/messages/send"))
	}

	h.env.Model.Call("gmail_send", `{"to":"ana@example.com","subject":"Three","body":"3"}`)
	h.env.Model.Text("Ana has it.")
	h.event(t, "Ev2", slacktest.DM("D1", owner, "mail Ana", "100.2"))
	h.fake.WaitCalls(t, "chat.postMessage", 6)
	qs = questions(h.fake)
	if !strings.Contains(qs[2].text, "gmail_send to addresses at example.com") {
		t.Fatalf("question = %q", qs[2].text)
	}
	press(qs[2], actionAlways)
	h.fake.WaitCalls(t, "chat.postMessage", 7)
	h.env.Model.Call("gmail_send", `{"to":"carl@example.com","subject":"Four","body":"4"}`)
	h.env.Model.Text("Carl has it.")
	h.event(t, "Ev3", slacktest.DM("D1", owner, "mail Carl", "100.3"))
	if p := h.fake.WaitCalls(t, "chat.postMessage", 8)[7].Params; p["text"] != "Carl has it." || api.Count("POST /gmail/v1/users/me/messages/send") != 3 {
		t.Fatalf("within the rule: %v, %d sends", p, api.Count("POST /gmail/v1/users/me/messages/send"))
	}
	h.event(t, "Ev4", slacktest.DM("D1", owner, "/audit", "100.4"))
	audit := h.fake.WaitCalls(t, "chat.postMessage", 9)[8].Params["text"]
	for _, want := range []string{"allowed by rule #", "denied: Send an email to eve@example.org", "approved, ran: Send an email to bob@example.com"} {
		if !strings.Contains(audit, want) {
			t.Errorf("/audit lacks %q:\n%s", want, audit)
		}
	}
}
