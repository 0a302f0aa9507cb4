package telegram

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
)

// Telegram passes the channel conformance suite against the fake Bot API,
// polling.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

// conformance is the suite's harness: two private chats, Ana's and Bea's.
type conformance struct {
	bridgetest.Fakes[*telegramtest.Server]
}

var people = []telegramtest.User{ana, byName}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, Stream: true, FilesIn: true, FilesOut: true}
}

// server is the test's fake Bot API, shared by the processes of a test.
func (c *conformance) server(t *testing.T) *telegramtest.Server { return c.For(t, telegramtest.New) }

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	tg := c.server(t)
	d := b.Delivery
	d.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	a := New(Config{Token: telegramtest.Token, APIEndpoint: tg.Endpoint(), AllowedUsers: []string{"42", "@bea"},
		SendPerSecond: -1, SendPerChatSecond: -1, SendPerGroupMinute: -1, Stream: b.Stream, Delivery: d},
		bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	stop := bridgetest.Running(t, a)
	chattest.Eventually(t, "connected", a.Ready)
	return a, stop
}

func (c *conformance) ChatKey(i int) string { return "telegram:" + strconv.FormatInt(people[i].ID, 10) }

func (c *conformance) push(t *testing.T, m telegramtest.Message) string {
	tg := c.server(t)
	id := tg.Push(m)
	tg.WaitFor(t, "the update confirmed", func() bool { return tg.Confirmed(id) })
	return strconv.Itoa(id)
}

func (c *conformance) Send(t *testing.T, i int, text string) string {
	return c.push(t, telegramtest.Message{From: people[i], Text: text})
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) {
	id, _ := strconv.Atoi(ref)
	tg := c.server(t)
	polls := len(tg.Calls("getUpdates"))
	tg.Resend(id)
	tg.WaitFor(t, "the update delivered again", func() bool { return len(tg.Calls("getUpdates")) >= polls+1 })
}

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	return c.push(t, telegramtest.Message{From: people[i], Text: text, Document: &telegramtest.File{Name: name, MIME: "text/plain", Content: content}})
}

func (c *conformance) Answers(i int) []string {
	var out []string
	for _, s := range c.Fake().Sent() {
		if s.ChatID != people[i].ID {
			continue
		}
		text := s.Text
		if v, err := telegramtest.CheckHTML(text); err == nil && s.ParseMode == "HTML" {
			text = v
		}
		out = append(out, strings.TrimSpace(text))
	}
	return out
}

func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	for _, u := range c.Fake().Uploads() {
		if u.ChatID == strconv.FormatInt(people[i].ID, 10) {
			out[u.Name] = u.Content
		}
	}
	return out
}

func (c *conformance) Approve(t *testing.T, i int) {
	sent := c.Fake().Sent()
	for k := len(sent) - 1; k >= 0; k-- {
		if sent[k].ChatID != people[i].ID {
			continue
		}
		for _, b := range sent[k].Buttons {
			if strings.HasPrefix(b.Text, "Approve") {
				c.Fake().Click(people[i], people[i].ID, 0, sent[k].MessageID, b.Data)
				return
			}
		}
	}
	t.Fatal("no question with an Approve button")
}

func (c *conformance) Hold(n int) { c.Fake().Hold("sendMessage", n) }

func (c *conformance) Held() int { return c.Fake().Waiting("sendMessage") }

// Release waits until the send the stop abandoned has ended, so it is
// not let through after the fact, then lets sends through.
func (c *conformance) Release() {
	c.Fake().WaitFor(c.Owner(), "the abandoned send to end", func() bool { return c.Fake().Waiting("sendMessage") == 0 })
	c.Fake().Resume("sendMessage")
}

// What the Telegram channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Mounter    = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Drafter    = (*Adapter)(nil)
	_ bridge.Speaker    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
)
