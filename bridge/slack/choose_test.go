package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"loadout/bridge/slack/slacktest"
	"loadout/tools"
)

// pickColour is a tool that asks its person to pick a colour, as an MCP
// server's elicitation does, and returns the pick.
func pickColour(r *tools.Registry) error {
	return r.Add(tools.New(tools.Definition{Name: "pick_colour", Description: "Ask the person for a colour", ReadOnly: true},
		func(ctx context.Context, in struct{}) (any, error) {
			a, ok := tools.AskerFrom(ctx)
			if !ok {
				return "nobody to ask", nil
			}
			ans, err := a.Ask(ctx, tools.Question{Text: "Which colour?", Choices: []string{"red", "green"}})
			if err != nil {
				return "not answered: " + err.Error(), nil
			}
			return "picked " + ans, nil
		}))
}

// TEST: a running tool's question goes out with a button per choice; a
// press by another allowed person is refused privately and answers
// nothing; the owner's press answers it, the buttons give way to the
// choice, and the tool gets it.
func TestQuestionButtonsOverSocketMode(t *testing.T) {
	h := start(t, options{register: pickColour, allowed: []string{owner, "UBEA"}})
	h.env.Model.Call("pick_colour", `{}`)
	h.env.Model.Text("Green it is.")
	h.event(t, "Ev1", slacktest.DM("D1", owner, "pick a colour", "100.1"))
	posts := h.fake.WaitCalls(t, "chat.postMessage", 1)
	var ts, text, green string
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
			if b.Type == "actions" && len(b.Elements) == 2 && strings.HasPrefix(b.Elements[1].ActionID, actionAnswer) {
				ts, text, green = h.fake.TSOf(p.Params["channel"], p.Params["text"]), p.Params["text"], b.Elements[1].Value
			}
		}
	}
	if green == "" || !strings.Contains(text, "Which colour?") {
		t.Fatalf("no question with choices among %v", posts)
	}
	press := func(user string) {
		h.envelopes++
		id := fmt.Sprintf("env-press-%d", h.envelopes)
		h.fake.Send(t, id, "interactive", slacktest.BlockAction(user, "D1", "", ts, text, actionAnswer+"_2", green), 0)
		h.fake.WaitAck(t, id)
	}
	press("UBEA")
	if w := h.fake.WaitCalls(t, "chat.postEphemeral", 1)[0].Params; w["user"] != "UBEA" || !strings.Contains(w["text"], "Only the person who asked") {
		t.Fatalf("refusal = %v", w)
	}
	press(owner)
	h.fake.WaitCalls(t, "chat.postMessage", 2)
	reqs := h.env.Model.Requests()
	last := reqs[len(reqs)-1].Messages
	if got := last[len(last)-1].Content; got != "picked green" {
		t.Fatalf("the tool got %q", got)
	}
}
