package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/tools"
)

// Found by probing: the conversation page hid from another member of a
// group only a personal result itself, while the model's later calls on
// its person's turn showed what it copied from it (a PIN from a memory
// recall, pasted into a search) in their arguments and results. The page
// goes through the model's own rule (chat.HideOthers): Bea sees neither,
// Ana sees all of it.
func TestWhatTheModelCopiedFromAPersonalResultShowsOnlyToItsPerson(t *testing.T) {
	s := newSite(t)
	const (
		ana, bea = "telegram:1001", "telegram:1002"
		room     = "telegram:-200"
		pin      = "4921"
	)
	ctx := context.Background()
	sess, err := s.Store.OpenSession(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Append(ctx, sess.ID, []chat.Message{
		{Role: chat.RoleUser, Text: "what is my PIN, and is it a common one?", UserKey: ana},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "r1", Name: "memory", Arguments: `{"action":"recall"}`}}},
		{Role: chat.RoleTool, ToolCallID: "r1", ToolName: "memory", Status: tools.StatusSuccess, Text: "Ana's PIN is " + pin, UserKey: ana},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "l1", Name: "lookup", Arguments: `{"text":"is ` + pin + ` a common PIN"}`}}},
		{Role: chat.RoleTool, ToolCallID: "l1", ToolName: "lookup", Status: tools.StatusSuccess, Text: "nothing found for is " + pin + " a common PIN"},
		{Role: chat.RoleAssistant, Text: "It is not a common one, Ana."},
		{Role: chat.RoleUser, Text: "what did Ana look up?", UserKey: bea},
		{Role: chat.RoleAssistant, Text: "I can't share that."},
	}, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	view := func(user string) string {
		t.Helper()
		c := client(t)
		s.signIn(t, c, user)
		code, body := get(t, c, s.URL+"/conversation?key="+room)
		if code != http.StatusOK {
			t.Fatalf("the group as %s: %d\n%s", user, code, body)
		}
		return body
	}
	body := view(bea)
	if strings.Contains(body, pin) {
		t.Errorf("Bea's page shows what came of Ana's recall:\n%s", body)
	}
	for _, w := range []string{"A personal result of " + ana, "The arguments of a call for " + ana, "The result of a call for " + ana, "what did Ana look up?", "It is not a common one, Ana."} {
		if !strings.Contains(body, w) {
			t.Errorf("Bea's page lacks %q:\n%s", w, body)
		}
	}
	body = view(ana)
	if n := strings.Count(body, pin); n != 3 || strings.Contains(body, "not shown") || strings.Contains(body, "A personal result of") {
		t.Errorf("Ana's page shows her PIN %d times (want 3: the recall, the lookup's arguments and its result):\n%s", n, body)
	}
}

// A person opening a conversation of someone else's that exists, with
// an open session, gets 404: only the ownership check stands between
// them (another's chat with no session is 404 for want of one).
func TestAnotherPersonsConversationIsNotFound(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	sess, err := s.Store.OpenSession(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Append(ctx, sess.ID, []chat.Message{
		{Role: chat.RoleUser, Text: "my secret plans", UserKey: other},
		{Role: chat.RoleAssistant, Text: "Noted, your secret plans."},
	}, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	op := client(t)
	s.operator(t, op)
	if code, body := get(t, op, s.URL+"/conversation?key="+other); code != http.StatusOK || !strings.Contains(body, "my secret plans") {
		t.Fatalf("the operator's view of the chat: %d\n%s", code, body)
	}
	c := client(t)
	s.person(t, c)
	if code, body := get(t, c, s.URL+"/conversation?key="+other); code != http.StatusNotFound || strings.Contains(body, "secret plans") {
		t.Fatalf("another person's chat: %d\n%s", code, body)
	}
	// The owner sees it.
	o := client(t)
	s.signIn(t, o, other)
	if code, body := get(t, o, s.URL+"/conversation?key="+other); code != http.StatusOK || !strings.Contains(body, "my secret plans") {
		t.Fatalf("the owner's view of the chat: %d\n%s", code, body)
	}
}

// A delegate call's result shows the sub-agent's steps folded under it,
// to the person who delegated; another member of the group reads whose
// they are, not what they hold.
func TestSubAgentStepsFoldUnderTheirCallForTheirPersonOnly(t *testing.T) {
	s := newSite(t)
	const (
		ana, bea = "telegram:1001", "telegram:1002"
		room     = "telegram:-300"
	)
	ctx := context.Background()
	sub, err := s.Store.OpenSession(ctx, room+"#sub1:0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Append(ctx, sub.ID, []chat.Message{
		{Role: chat.RoleUser, Text: "Compare the two flats.", UserKey: ana},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "w1", Name: "web_fetch", Arguments: `{"url":"https://flats.example/7"}`}}},
		{Role: chat.RoleTool, ToolCallID: "w1", ToolName: "web_fetch", Status: tools.StatusSuccess, Text: "flat 7: 3 rooms"},
		{Role: chat.RoleAssistant, Text: "Flat 7 is bigger."},
	}, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	sess, err := s.Store.OpenSession(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Append(ctx, sess.ID, []chat.Message{
		{Role: chat.RoleUser, Text: "which flat?", UserKey: ana},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "d1", Name: chat.DelegateName, Arguments: `{"task":"Compare the two flats."}`}}},
		{Role: chat.RoleTool, ToolCallID: "d1", ToolName: chat.DelegateName, Status: tools.StatusSuccess,
			Text: fmt.Sprintf(`{"status":"done","answer":"Flat 7 is bigger.","session":%d}`, sub.ID)},
		{Role: chat.RoleAssistant, Text: "Flat 7."},
		{Role: chat.RoleUser, Text: "hello", UserKey: bea},
	}, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	view := func(user string) string {
		t.Helper()
		c := client(t)
		s.signIn(t, c, user)
		code, body := get(t, c, s.URL+"/conversation?key="+room)
		if code != http.StatusOK {
			t.Fatalf("the group as %s: %d\n%s", user, code, body)
		}
		return body
	}
	if body := view(ana); !strings.Contains(body, "the sub-agent's 4 steps") || !strings.Contains(body, "flat 7: 3 rooms") || !strings.Contains(body, "flats.example/7") {
		t.Errorf("Ana's page does not fold the sub-agent's steps under its call:\n%s", body)
	}
	body := view(bea)
	if strings.Contains(body, "flat 7: 3 rooms") || strings.Contains(body, "flats.example") {
		t.Errorf("Bea's page shows Ana's sub-agent's steps:\n%s", body)
	}
	if !strings.Contains(body, "steps are "+ana+"'s") {
		t.Errorf("Bea's page does not say whose the steps are:\n%s", body)
	}
}
