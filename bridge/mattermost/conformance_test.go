package mattermost

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/mattermost/mattermosttest"
	"loadout/chat/chattest"
)

// Mattermost passes the channel conformance suite against the fake
// Mattermost: its REST API and websocket, through the channel's own
// HTTP and websocket clients, and its presses posted to the buttons'
// endpoint on a server of the process's own.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

var (
	ana    = mattermosttest.User{ID: mattermosttest.ID("ana"), Name: "ana"}
	bea    = mattermosttest.User{ID: mattermosttest.ID("bea"), Name: "bea"}
	people = []mattermosttest.User{ana, bea}
)

// conformance is the suite's harness: two direct message channels,
// Ana's (allowed by id) and Bea's (by username).
type conformance struct {
	bridgetest.Fakes[*mattermosttest.Server]
}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, Stream: true, FilesIn: true, FilesOut: true}
}

// server is the test's fake Mattermost, shared by the processes of a
// test.
func (c *conformance) server(t *testing.T) *mattermosttest.Server {
	return c.For(t, mattermosttest.New)
}

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	mm := c.server(t)
	d := b.Delivery
	d.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	mux := http.NewServeMux()
	web := httptest.NewServer(mux)
	t.Cleanup(web.Close)
	a := New(Config{URL: mm.URL, Token: mattermosttest.Token, AllowedUsers: []string{ana.ID, bea.Name},
		ActionsURL: web.URL + DefaultActionsPath, SendPerSecond: -1, MaxMessage: 4000, Stream: b.Stream, Delivery: d},
		bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	a.Mount(mux)
	return a, run(t, mm, a)
}

// run runs a until the test ends or stop is called, once it has a
// websocket of its own and has read back what it missed.
func run(t testing.TB, mm *mattermosttest.Server, a *Adapter) (stop func()) {
	t.Helper()
	before := mm.Sessions()
	stop = bridgetest.Running(t, a)
	mm.WaitFor(t, "a new websocket", func() bool { return mm.Sessions() > before && a.Ready() && a.listening() })
	return stop
}

func (c *conformance) ChatKey(i int) string { return "mattermost:" + c.Fake().DM(people[i].ID) }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	mm := c.server(t)
	return mm.Send(mattermosttest.Post{User: people[i].ID, Channel: mm.DM(people[i].ID), Message: text})
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) { c.server(t).Redispatch(ref) }

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	mm := c.server(t)
	return mm.Send(mattermosttest.Post{User: people[i].ID, Channel: mm.DM(people[i].ID), Message: text,
		Files: []mattermosttest.File{{Name: name, MIME: "text/plain", Content: content}}})
}

func (c *conformance) Answers(i int) []string {
	var out []string
	for _, p := range c.Fake().Sent(c.Fake().DM(people[i].ID)) {
		if p.Message != "" {
			out = append(out, strings.TrimSpace(p.Message))
		}
	}
	return out
}

func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	for _, p := range c.Fake().Sent(c.Fake().DM(people[i].ID)) {
		for _, f := range p.Files {
			out[f.Name] = f.Content
		}
	}
	return out
}

func (c *conformance) Approve(t *testing.T, i int) {
	sent := c.Fake().Sent(c.Fake().DM(people[i].ID))
	for k := len(sent) - 1; k >= 0; k-- {
		if sent[k].Props["attachments"] != nil {
			if status, text, err := c.Fake().Press(people[i], sent[k].ID, verbApprove); err != nil || status != http.StatusOK || text != "" {
				t.Fatalf("the press was answered %d %q (%v)", status, text, err)
			}
			return
		}
	}
	t.Fatal("no question with buttons")
}

func (c *conformance) Hold(n int) { c.Fake().Posts.Hold("", n) }

// Held is how many of the bot's posts the hold holds.
func (c *conformance) Held() int { return c.Fake().Posts.Waiting("") }

// Release waits until the post the stop abandoned has ended, so it is
// not let through after the fact, then lets posts through.
func (c *conformance) Release() {
	c.Fake().WaitFor(c.Owner(), "the abandoned post to end", func() bool { return c.Fake().Posts.Waiting("") == 0 })
	c.Fake().Posts.Release("")
}

// What the Mattermost channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Drafter    = (*Adapter)(nil)
	_ bridge.Mounter    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
)
