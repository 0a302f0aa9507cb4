package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/bridge/triggers"
	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/chat"
	"loadout/chat/chattest"
)

const hookSecret = "hook-secret-for-tests-0123"

// hookPost posts body to trigger name at addr, signed with secret, and
// returns the status.
func hookPost(t *testing.T, addr, name, secret string, body []byte, header ...string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/"+name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", bridge.HubSign(secret, body))
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A trigger's request reaches a Telegram chat and a WhatsApp chat
// through `loadout serve`: its turn runs as the chat's person, tainted
// (a memory save after reading the body asks first), answered in the
// chat, and the person's reply carries the conversation on. A forged,
// a replayed and an oversized request start nothing.
func TestTriggersRunInTelegramAndWhatsAppChats(t *testing.T) {
	if testing.Short() {
		t.Skip("runs loadout serve")
	}
	tg := telegramtest.New(t)
	wa := whatsapptest.New(t)
	model := chattest.NewModelServer(t)
	said := regexp.MustCompile(`"event":"([^"]*)"`)
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		var users []string
		saved := false
		for _, m := range req.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
			saved = saved || slices.ContainsFunc(m.ToolCalls, func(c goopenai.ToolCall) bool { return c.Function.Name == "memory" })
		}
		last := users[len(users)-1]
		switch {
		case strings.Contains(last, "remember it") && !saved:
			// The body asks for a memory: the turn is tainted, so the
			// save waits for the person.
			return chattest.Step{Calls: []chat.ToolCall{{Name: "memory", Arguments: `{"action":"save","text":"the deploy broke"}`}}}
		case strings.HasPrefix(last, "what was it"):
			return chattest.Step{Text: fmt.Sprintf("Earlier: %d messages, first %q", len(users), said.FindString(users[0]))}
		case said.MatchString(last):
			return chattest.Step{Text: "Event: " + said.FindStringSubmatch(last)[1]}
		}
		return chattest.Step{Text: "ok"}
	}
	dir := t.TempDir()
	addr := bridgetest.FreeAddr(t)
	cfg := fmt.Sprintf(`llm:
  base_url: %s
  api_key: sk-test
store:
  path: %s
http:
  listen: %s
log:
  level: info
telegram:
  enabled: true
  token: %q
  api_endpoint: %q
  allowed_users: [42]
whatsapp:
  enabled: true
  access_token: %s
  phone_number_id: %q
  app_secret: %s
  verify_token: %s
  api_url: %q
  allowed_numbers: ["+15551234567"]
triggers:
  - name: deploys
    secret: %s
    chat: telegram:42
    prompt: Tell me about this deploy.
  - name: orders
    secret: %s-wa
    chat: whatsapp:15551234567
    prompt: Tell me about this order.
`, model.URL, filepath.Join(dir, "loadout.db"), addr, telegramtest.Token, tg.Endpoint(),
		whatsapptest.Token, whatsapptest.PhoneNumberID, whatsapptest.AppSecret, whatsapptest.VerifyToken, wa.APIURL, hookSecret, hookSecret)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := serveConfig(t, path)
	var logs chattest.LogBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("loadout serve's log:\n%s", logs.String())
		}
	})
	bridgetest.Await(t, "loadout serve to listen", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	telegramTexts := func() []string {
		var out []string
		for _, s := range tg.Sent() {
			if s.ChatID == 42 {
				out = append(out, s.Text)
			}
		}
		return out
	}

	// Forged: unsigned, another secret, another body; oversized.
	body := []byte(`{"event":"deployed v2"}`)
	for _, secret := range []string{"", "not-the-secret-at-all", hookSecret + "-wa"} {
		if got := hookPost(t, addr, "deploys", secret, body); got != http.StatusUnauthorized {
			t.Fatalf("a request signed with %q: %d, want 401", secret, got)
		}
	}
	big := bytes.Repeat([]byte("x"), triggers.MaxBody+1)
	if got := hookPost(t, addr, "deploys", hookSecret, big); got != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized request: %d", got)
	}

	// Signed, and delivered twice (GitHub's redelivery keeps the id).
	for range 2 {
		if got := hookPost(t, addr, "deploys", hookSecret, body, "X-GitHub-Delivery", "7e3a-1"); got != http.StatusAccepted {
			t.Fatalf("a signed request: %d\n%s", got, logs.String())
		}
	}
	bridgetest.Await(t, "the deploy's answer in the Telegram chat", func() bool { return slices.Contains(telegramTexts(), "Event: deployed v2") })
	// WhatsApp delivers what a business starts within 24 hours of the
	// person's last message: the person has written today.
	_, hi := wa.Body(whatsapptest.Message{From: "15551234567", ID: "wamid.hi", Text: "hi"})
	bridgetest.PostUntilTaken(t, "the person's hello", func(int) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/whatsapp/webhook", bytes.NewReader(hi))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", whatsapptest.Sign(whatsapptest.AppSecret, hi))
		return req
	})
	bridgetest.Await(t, "the hello's answer", func() bool { return slices.Contains(wa.Texts("15551234567"), "ok") })
	if got := hookPost(t, addr, "orders", hookSecret+"-wa", []byte(`{"event":"order 17 paid"}`)); got != http.StatusAccepted {
		t.Fatalf("the WhatsApp trigger: %d", got)
	}
	bridgetest.Await(t, "the order's answer in the WhatsApp chat", func() bool { return slices.Contains(wa.Texts("15551234567"), "Event: order 17 paid") })

	// The person replies: the conversation goes on from the trigger's turn.
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, ChatID: 42, ChatType: "private", Text: "what was it?"})
	bridgetest.Await(t, "the reply's answer", func() bool {
		return slices.ContainsFunc(telegramTexts(), func(s string) bool { return strings.HasPrefix(s, "Earlier: 2 messages") })
	})
	if n := strings.Count(strings.Join(telegramTexts(), "\n"), "Event: deployed v2"); n != 1 {
		t.Fatalf("the redelivered request was answered %d times: %q", n, telegramTexts())
	}

	// A person makes a trigger of their own in their private chat; its
	// secret is shown there once and never logged; it works, is listed,
	// and once removed starts nothing.
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, ChatID: -5, ChatType: "group", Text: "/trigger new ci Tell me what CI says."})
	bridgetest.Await(t, "the refusal in a group", func() bool {
		return slices.ContainsFunc(tg.Sent(), func(s telegramtest.Sent) bool { return s.ChatID == -5 && strings.Contains(s.Text, "private chat") })
	})
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, ChatID: 42, ChatType: "private", Text: "/trigger new ci Tell me what CI says."})
	shape := regexp.MustCompile(triggers.Shape)
	var made string
	bridgetest.Await(t, "the new trigger's secret", func() bool {
		for _, s := range telegramTexts() {
			if strings.HasPrefix(s, "Trigger ci made.") {
				made = shape.FindString(s)
			}
		}
		return made != ""
	})
	if got := hookPost(t, addr, "ci", made, []byte(`{"event":"tests passed"}`)); got != http.StatusAccepted {
		t.Fatalf("the person's trigger: %d", got)
	}
	bridgetest.Await(t, "the person's trigger's answer", func() bool { return slices.Contains(telegramTexts(), "Event: tests passed") })
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, ChatID: 42, ChatType: "private", Text: "/trigger list"})
	bridgetest.Await(t, "the list", func() bool {
		return slices.ContainsFunc(telegramTexts(), func(s string) bool { return strings.HasPrefix(s, "Your triggers:\nci — /hooks/ci") })
	})
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, ChatID: 42, ChatType: "private", Text: "/trigger remove ci"})
	bridgetest.Await(t, "the removal", func() bool {
		return slices.Contains(telegramTexts(), "Trigger ci removed: its URL starts nothing now.")
	})
	if got := hookPost(t, addr, "ci", made, []byte(`{"event":"again"}`)); got != http.StatusUnauthorized {
		t.Fatalf("a removed trigger: %d", got)
	}
	if strings.Contains(logs.String(), made) || strings.Contains(logs.String(), hookSecret) {
		t.Fatal("a trigger's secret reached the log")
	}

	// Tainted from its start: what the body asks to remember waits for
	// the person.
	remember := []byte(`{"event":"the deploy broke, remember it"}`)
	if got := hookPost(t, addr, "deploys", hookSecret, remember); got != http.StatusAccepted {
		t.Fatalf("a signed request: %d", got)
	}
	bridgetest.Await(t, "the memory save to be asked", func() bool {
		return slices.ContainsFunc(telegramTexts(), func(s string) bool { return strings.Contains(s, "the deploy broke") && strings.Contains(s, "#") })
	})
}
