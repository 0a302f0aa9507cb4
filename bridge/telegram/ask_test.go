package telegram

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/google/gmail"
	"loadout/google/googletest"
	"loadout/store/storetest"
	"loadout/tools"
)

// TEST: the model calls gmail_send in a group chat. The fake Google sees
// no send; Ana sees the summary with Approve and Deny; Bea (allowed, but
// not the one asked) is refused at her press; after a restart Ana's
// Approve sends exactly once with the stored arguments, the question
// loses its buttons and says what was chosen, and the model answers; a
// second press does nothing.
func TestApprovalButtons(t *testing.T) {
	api := googletest.NewAPI(t)
	api.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"m1","threadId":"t1","labelIds":["SENT"]}`)
	h := newHarness(t, storetest.Options{Register: func(r *tools.Registry) error {
		g := gmail.New(&googletest.Client{Endpoint: api.URL}, gmail.Options{})
		return r.AddGroup(g.Group, g.Tools...)
	}})
	cfg := h.config(nil)
	_, stop := h.start(h.env, cfg)
	h.env.Model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	h.env.Model.Call("gmail_send", `{"to":"bob@example.com","subject":"Invoice","body":"Hi Bob,\nthe invoice."}`)
	h.tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "group", Text: "@loadout_bot email Bob the invoice"})
	sent := h.tg.WaitSent(t, 1)
	q := sent[0]
	if !strings.Contains(q.Text, "Send an email to bob@example.com, subject &#39;Invoice&#39;, 2 lines") && !strings.Contains(q.Text, "Send an email to bob@example.com, subject 'Invoice', 2 lines") {
		t.Fatalf("question = %q", q.Text)
	}
	// The mail goes to one domain: "Always allow" is offered for it, on a
	// row of its own.
	if len(q.Buttons) != 3 || !strings.HasPrefix(q.Buttons[0].Text, "Approve #") || !strings.HasPrefix(q.Buttons[1].Text, "Deny #") || !strings.HasSuffix(q.Buttons[0].Data, ":42") ||
		!strings.HasPrefix(q.Buttons[2].Text, "Always allow #") || !strings.HasPrefix(q.Buttons[2].Data, "al:") || !strings.Contains(q.Text, "gmail_send to addresses at example.com") {
		t.Fatalf("buttons = %+v", q.Buttons)
	}
	if n := api.Count("POST /gmail/v1/users/me/messages/send"); n != 0 {
		t.Fatalf("Gmail saw %d sends before approval", n)
	}
	approve := q.Buttons[0].Data
	code := chat.CodeOf(strings.Split(approve, ":")[1])
	if !strings.Contains(q.Text, code) || !strings.Contains(q.Buttons[0].Text, code) {
		t.Fatalf("the question or its button lacks the code %s: %q %+v", code, q.Text, q.Buttons)
	}
	if h.modelSaw(code) || h.modelSaw(strings.TrimPrefix(code, "#")) {
		t.Fatal("the model saw the approval's code")
	}

	// Bea presses Approve: refused at the press.
	h.tg.Click(byName, group, 0, q.MessageID, approve)
	h.tg.WaitFor(t, "Bea's press answered", func() bool {
		for _, c := range h.tg.Calls("answerCallbackQuery") {
			if c.Params.Get("show_alert") == "true" && strings.Contains(c.Params.Get("text"), "Only the person who asked") {
				return true
			}
		}
		return false
	})

	// A restart between the question and the answer.
	stop()
	_, stop = h.start(h.env, cfg)
	defer stop()
	h.env.Model.Text("Sent it to Bob.")
	h.tg.Click(ana, group, 0, q.MessageID, approve)
	sent = h.tg.WaitSent(t, 2)
	if !strings.Contains(sent[1].Text, "Sent it to Bob.") {
		t.Fatalf("answer = %q", sent[1].Text)
	}
	if n := api.Count("POST /gmail/v1/users/me/messages/send"); n != 1 {
		t.Fatalf("Gmail saw %d sends", n)
	}
	var req struct {
		Raw string `json:"raw"`
	}
	_ = json.Unmarshal([]byte(api.Last("POST /gmail/v1/users/me/messages/send").Body), &req)
	raw, _ := base64.URLEncoding.DecodeString(req.Raw)
	if !strings.Contains(string(raw), "To: <bob@example.com>") || !strings.Contains(string(raw), "Subject: Invoice") {
		t.Fatalf("sent message = %q", raw)
	}
	h.tg.WaitFor(t, "the question edited", func() bool {
		for _, m := range h.tg.Sent() {
			if m.MessageID == q.MessageID {
				return len(m.Buttons) == 0 && strings.HasSuffix(m.Text, "You chose: Approve.")
			}
		}
		return false
	})
	// A second press: refused to the presser alone, with why; nothing
	// is sent again and nothing runs.
	h.tg.Click(ana, group, 0, q.MessageID, approve)
	h.tg.WaitFor(t, "the second press refused", func() bool {
		for _, c := range h.tg.Calls("answerCallbackQuery") {
			if c.Params.Get("show_alert") == "true" && strings.Contains(c.Params.Get("text"), "already answered") {
				return true
			}
		}
		return false
	})
	if n := len(h.tg.Calls("sendMessage")); n != 2 {
		t.Fatalf("%d messages sent, want the question and the answer", n)
	}
	if n := api.Count("POST /gmail/v1/users/me/messages/send"); n != 1 {
		t.Fatalf("Gmail saw %d sends after a double press", n)
	}
	if got := fmt.Sprint(len(h.env.Model.Requests())); got != "3" {
		t.Fatalf("model requests = %s", got)
	}
}

// A press Telegram delivers twice (a webhook answer lost) is stored once,
// and answered — "You chose", the buttons taken away — once, after it is
// stored: acknowledging it before, a press that could not be stored
// would have told the person their choice was taken.
func TestPressDeliveredTwiceIsAcknowledgedOnce(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	id := holdApproval(t, h.env, "telegram:42", "telegram:42", time.Hour)
	h.env.Model.Text("Done.")
	a, _ := h.start(h.env, h.config(func(c *Config) {
		c.Mode = ModeWebhook
		c.WebhookURL = "https://bot.example.org/telegram/hook"
		c.WebhookSecret = "s3cret"
	}))
	h.tg.WaitFor(t, "setWebhook", func() bool { return len(h.tg.Calls("setWebhook")) == 1 })
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	press := fmt.Sprintf(`{"update_id": 777, "callback_query": {"id": "cb1", "data": %q, "chat_instance": "ci",
		"from": {"id": 42, "is_bot": false, "first_name": "Ana", "username": "ana"},
		"message": {"message_id": 5, "date": 1, "chat": {"id": 42, "type": "private"}, "text": "question"}}}`, dataApprove+":"+id+":42")
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(press))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("webhook answered %d", resp.StatusCode)
		}
	}
	if got := h.tg.WaitSent(t, 1); !strings.Contains(got[0].Text, "Done.") {
		t.Fatalf("answer = %q", got[0].Text)
	}
	a.pipe.Stop() // whatever is queued has run
	chose := 0
	for _, c := range h.tg.Calls("answerCallbackQuery") {
		if strings.Contains(c.Params.Get("text"), "You chose") {
			chose++
		}
	}
	edited := 0
	for _, c := range h.tg.Calls("editMessageText") {
		// The question's edits; the answer's own draft may be edited too.
		if c.Params.Get("message_id") == "5" && strings.Contains(c.Params.Get("text"), "You chose") {
			edited++
		}
	}
	if chose != 1 || edited != 1 {
		t.Fatalf("the press was acknowledged %d times and its question edited %d times", chose, edited)
	}
	if n := len(h.tg.Sent()); n != 1 {
		t.Fatalf("%d answers to one press", n)
	}
}

// holdApproval stores a pending approval of a call to a tool that does
// not exist, asked in chatKey for userKey, as a turn that held it would.
func holdApproval(t *testing.T, env *storetest.Env, chatKey, userKey string, ttl time.Duration) string {
	t.Helper()
	ctx := context.Background()
	sess, err := env.Store.OpenSession(ctx, chatKey)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("held%012d", time.Now().UnixNano()%1e12)
	id = strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return 'a' + r - '0'
		}
		return r
	}, id)
	msgs := []chat.Message{
		{Role: chat.RoleUser, Text: "do it", UserKey: userKey},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "gone_tool", Arguments: "{}"}}},
		{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "gone_tool", Status: "pending", Text: "{}"},
		{Role: chat.RoleAssistant, Text: "I need your approval first:\nRun gone_tool", Ask: id},
	}
	a := chat.Approval{ID: id, ChatKey: chatKey, UserKey: userKey, CallID: "c1", Tool: "gone_tool", Arguments: "{}",
		Summary: "Run gone_tool", Status: chat.ApprovalPending, ExpiresAt: time.Now().Add(ttl)}
	if err := env.Store.Hold(ctx, sess.ID, msgs, chat.Usage{}, []chat.Approval{a}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TEST: a press that cannot count changes nothing others see. A forged
// press (no such request) and one on a request that is someone else's
// get an alert to the presser and no edit; a press on an expired
// request is refused and its question says it expired, without buttons;
// none of them reaches the chat.
func TestRefusedPressChangesNothingForOthers(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	a, _ := h.start(h.env, h.config(nil))
	chattest.Eventually(t, "the adapter to be ready", a.Ready)
	mine := holdApproval(t, h.env, "telegram:-100", "telegram:42", time.Hour)
	expired := holdApproval(t, h.env, "telegram:-100", "telegram:42", -time.Minute)
	alerts := func() []string {
		var out []string
		for _, c := range h.tg.Calls("answerCallbackQuery") {
			if c.Params.Get("show_alert") == "true" {
				out = append(out, c.Params.Get("text"))
			}
		}
		return out
	}
	h.tg.Click(ana, -100, 0, 5, dataApprove+":nosuchrequest1:42")
	h.tg.WaitFor(t, "the forged press refused", func() bool { return len(alerts()) == 1 })
	h.tg.Click(byName, -100, 0, 5, dataApprove+":"+mine+":"+strconv.FormatInt(byName.ID, 10))
	h.tg.WaitFor(t, "the press on another's request refused", func() bool { return len(alerts()) == 2 })
	if got := alerts(); !strings.Contains(got[0], "no request") || !strings.Contains(got[1], "Only the person who asked") {
		t.Fatalf("alerts = %q", got)
	}
	if n := len(h.tg.Calls("editMessageText")); n != 0 {
		t.Fatalf("a refused press edited the question %d times", n)
	}
	h.tg.Click(ana, -100, 0, 6, dataApprove+":"+expired+":42")
	h.tg.WaitFor(t, "the expired press refused", func() bool { return len(alerts()) == 3 })
	if got := alerts()[2]; !strings.Contains(got, "expired") {
		t.Fatalf("alert = %q", got)
	}
	h.tg.WaitFor(t, "the expired question edited", func() bool { return len(h.tg.Calls("editMessageText")) > 0 })
	edits := h.tg.Calls("editMessageText")
	if len(edits) != 1 || edits[0].Params.Get("message_id") != "6" || !strings.Contains(edits[0].Params.Get("text"), "expired") {
		t.Fatalf("edits = %+v", edits)
	}
	for _, c := range h.tg.Calls("answerCallbackQuery") {
		if strings.Contains(c.Params.Get("text"), "You chose") {
			t.Fatalf("a refused press was told %q", c.Params.Get("text"))
		}
	}
	if n := len(h.tg.Calls("sendMessage")); n != 0 || h.modelSaw("Approved") {
		t.Fatalf("a refused press reached the chat (%d messages)", n)
	}
}
