package feishu

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/feishu/feishutest"
	"loadout/chat/chattest"
)

// Feishu passes the channel conformance suite against the fake open
// platform: its open-apis, and its people posting encrypted, signed
// events to the callback.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

// The people of the tests: Ana and Bea are allowed, Mallory is not.
const (
	ana     = "ou_ana0000000000000000000000000a"
	bea     = "ou_bea0000000000000000000000000b"
	mallory = "ou_mallory0000000000000000000000"
)

var people = []string{ana, bea}

// conformance is the suite's harness: Ana's and Bea's private chats.
type conformance struct {
	bridgetest.Fakes[*feishutest.Server]
}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, Stream: true, FilesIn: true, FilesOut: true}
}

func (c *conformance) server(t *testing.T) *feishutest.Server { return c.For(t, feishutest.New) }

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	fs := c.server(t)
	d := b.Delivery
	d.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	cfg := testConfig(fs, d)
	cfg.Stream = b.Stream
	a := New(cfg, bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	return a, run(t, fs, a)
}

// testConfig is the channel's config on the fake.
func testConfig(fs *feishutest.Server, d bridge.Delivery) Config {
	return Config{AppID: feishutest.AppID, AppSecret: feishutest.AppSecret, VerificationToken: feishutest.VerificationToken,
		EncryptKey: feishutest.EncryptKey, APIURL: fs.URL, AllowedUsers: people, Delivery: d}
}

// run serves a's callback on a server of its own, as the process's, and
// runs a until the test ends or stop is called, once it is ready; the
// fake's people post to that server.
func run(t testing.TB, fs *feishutest.Server, a *Adapter) (stop func()) {
	t.Helper()
	mux := http.NewServeMux()
	a.Mount(mux)
	srv := httptest.NewServer(mux)
	fs.CallbackURL = srv.URL + a.cfg.CallbackPath
	t.Cleanup(srv.Close)
	running := bridgetest.Running(t, a)
	stop = func() { running(); srv.Close() } // a stopped process answers no callback
	fs.WaitFor(t, "the channel to be ready", a.Ready)
	return stop
}

// texts are the texts of the posts and cards sent to to, in order.
func texts(fs *feishutest.Server, to string) []string {
	var out []string
	for _, m := range fs.SentTo(to) {
		if m.Type != "file" {
			out = append(out, strings.TrimSpace(m.Text))
		}
	}
	return out
}

func (c *conformance) ChatKey(i int) string { return "feishu:" + people[i] }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	return c.server(t).Send(t, feishutest.Message{From: people[i], Text: text})
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) { c.server(t).Redeliver(t, ref) }

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	fs := c.server(t)
	// Feishu sends a file alone; its words come as a message of their own.
	fs.Send(t, feishutest.Message{From: people[i], File: name, Bytes: content})
	return fs.Send(t, feishutest.Message{From: people[i], Text: text})
}

func (c *conformance) Answers(i int) []string { return texts(c.Fake(), people[i]) }

func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range c.Fake().SentTo(people[i]) {
		if m.Type == "file" {
			out[m.Name] = m.Content
		}
	}
	return out
}

func (c *conformance) Approve(t *testing.T, i int) {
	sent := c.Fake().SentTo(people[i])
	for k := len(sent) - 1; k >= 0; k-- {
		for _, b := range sent[k].Buttons {
			if strings.HasPrefix(b.Label, "Approve") {
				if code, toast := c.Fake().Press(t, people[i], sent[k], b); code != http.StatusOK || !strings.Contains(toast, "success") {
					t.Fatalf("the press was answered %d %s", code, toast)
				}
				return
			}
		}
	}
	t.Fatal("no card with an Approve button")
}

// What the Feishu channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Drafter    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
	_ bridge.Mounter    = (*Adapter)(nil)
	_ bridge.Admitter   = (*Adapter)(nil)
)
