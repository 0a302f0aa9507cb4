package whatsapp

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/chat/chattest"
)

// WhatsApp passes the channel conformance suite against the fake Cloud
// API: its Graph API, and its webhook side posting signed notifications.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

// The people of the tests: Ana and Bea are allowed (written in two
// forms), Mallory is not.
const (
	ana     = "15551230001"
	bea     = "15551230002"
	mallory = "15559990666"
)

var people = []string{ana, bea}

// allowed is how the tests' config writes the allowed numbers: in
// international form with spaces and dashes, and with "+" alone.
var allowed = []string{"+1 555 123-0001", "+15551230002"}

// conformance is the suite's harness: Ana's and Bea's chats.
type conformance struct {
	bridgetest.Fakes[*whatsapptest.Server]
}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, FilesIn: true, FilesOut: true}
}

func (c *conformance) server(t *testing.T) *whatsapptest.Server { return c.For(t, whatsapptest.New) }

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	wa := c.server(t)
	d := b.Delivery
	d.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	a := New(testConfig(wa, d), bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	// A WhatsApp chat a business may write in is one whose person wrote
	// within 24 hours: each person wrote an hour ago, as far as the
	// store knows (what receiving a message records).
	for _, p := range people {
		if err := a.opened(context.Background(), route{To: p, At: time.Now().Add(-time.Hour).Unix()}); err != nil {
			t.Fatal(err)
		}
	}
	return a, run(t, wa, a)
}

// testConfig is the channel's config on the fake.
func testConfig(wa *whatsapptest.Server, d bridge.Delivery) Config {
	return Config{AccessToken: whatsapptest.Token, PhoneNumberID: whatsapptest.PhoneNumberID, AppSecret: whatsapptest.AppSecret,
		VerifyToken: whatsapptest.VerifyToken, APIURL: wa.APIURL, AllowedNumbers: allowed, Delivery: d}
}

// run serves a's webhook on a server of its own, as the process's, and
// runs a until the test ends or stop is called, once it is ready; the
// fake's people write to that server.
func run(t testing.TB, wa *whatsapptest.Server, a *Adapter) (stop func()) {
	t.Helper()
	mux := http.NewServeMux()
	a.Mount(mux)
	srv := httptest.NewServer(mux)
	wa.Webhook(srv.URL + a.cfg.WebhookPath)
	t.Cleanup(srv.Close)
	running := bridgetest.Running(t, a)
	stop = func() { running(); srv.Close() } // a stopped process answers no webhook
	wa.WaitFor(t, "the channel to be ready", a.Ready)
	return stop
}

func (c *conformance) ChatKey(i int) string { return "whatsapp:" + people[i] }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	return c.server(t).Send(t, whatsapptest.Message{From: people[i], Name: "p", Text: text})
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) { c.server(t).Redeliver(t, ref) }

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	return c.server(t).Send(t, whatsapptest.Message{From: people[i], File: &whatsapptest.Media{
		Kind: "document", Name: name, MimeType: "text/plain", Caption: text, Content: content}})
}

func (c *conformance) Answers(i int) []string {
	var out []string
	for _, s := range c.Fake().Texts(people[i]) {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

func (c *conformance) Uploads(i int) map[string][]byte { return c.Fake().Uploads(people[i]) }

func (c *conformance) Approve(t *testing.T, i int) {
	sent := c.Fake().Sent(people[i])
	for k := len(sent) - 1; k >= 0; k-- {
		for _, b := range sent[k].Buttons {
			if strings.HasPrefix(b.Title, "Approve") {
				c.Fake().Press(t, people[i], sent[k], b)
				return
			}
		}
	}
	t.Fatal("no question with an Approve button")
}

// What the WhatsApp channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Speaker    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
	_ bridge.Mounter    = (*Adapter)(nil)
)
