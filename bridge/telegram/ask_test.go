package telegram

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/google/gmail"
	"loadout/google/googletest"
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
	h := newHarness(t, chattest.Options{Register: func(r *tools.Registry) error {
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
	if len(q.Buttons) != 2 || !strings.HasPrefix(q.Buttons[0].Text, "Approve #") || !strings.HasPrefix(q.Buttons[1].Text, "Deny #") || !strings.HasSuffix(q.Buttons[0].Data, ":42") {
		t.Fatalf("buttons = %+v", q.Buttons)
	}
	if n := api.Count("POST /gmail/v1/users/me/messages/send"); n != 0 {
		t.Fatalf("Gmail saw %d sends before approval", n)
	}
	approve := q.Buttons[0].Data

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
	// A second press: nothing is sent again.
	h.tg.Click(ana, group, 0, q.MessageID, approve)
	sent = h.tg.WaitSent(t, 3)
	if !strings.Contains(sent[2].Text, "already answered") {
		t.Fatalf("second press = %q", sent[2].Text)
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
	h := newHarness(t, chattest.Options{})
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
		"message": {"message_id": 5, "date": 1, "chat": {"id": 42, "type": "private"}, "text": "question"}}}`, dataApprove+":a1b2:42")
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
	h.tg.WaitSent(t, 1) // the engine's answer to /approve (nothing is waiting)
	a.pipe.Stop()       // whatever is queued has run
	chose := 0
	for _, c := range h.tg.Calls("answerCallbackQuery") {
		if strings.Contains(c.Params.Get("text"), "You chose") {
			chose++
		}
	}
	if chose != 1 || len(h.tg.Calls("editMessageText")) != 1 {
		t.Fatalf("the press was acknowledged %d times and its question edited %d times", chose, len(h.tg.Calls("editMessageText")))
	}
	if n := len(h.tg.Sent()); n != 1 {
		t.Fatalf("%d answers to one press", n)
	}
}
