package discord

import (
	"log/slog"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/discord/discordtest"
	"loadout/chat/chattest"
)

// Discord passes the channel conformance suite against the fake Discord:
// its REST API and its gateway, through discordgo.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

// conformance is the suite's harness: two direct message channels,
// Ana's and Bea's.
type conformance struct {
	bridgetest.Fakes[*discordtest.Server]
}

var (
	ana    = discordtest.User{ID: "42", Name: "ana"}
	bea    = discordtest.User{ID: "43", Name: "bea"}
	people = []discordtest.User{ana, bea}
)

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, Stream: true, FilesIn: true, FilesOut: true}
}

// server is the test's fake Discord, shared by the processes of a test.
func (c *conformance) server(t *testing.T) *discordtest.Server { return c.For(t, discordtest.New) }

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	dc := c.server(t)
	d := b.Delivery
	d.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID, "@" + bea.Name},
		SendPerChannelSecond: -1, Stream: b.Stream, Delivery: d}, bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	return a, run(t, dc, a)
}

// run runs a until the test ends or stop is called, once it has a
// gateway session of its own.
func run(t testing.TB, dc *discordtest.Server, a *Adapter) (stop func()) {
	t.Helper()
	before, _, _, _ := dc.Gateway()
	stop = bridgetest.Running(t, a)
	dc.WaitFor(t, "a new gateway session", func() bool {
		n, _, _, _ := dc.Gateway()
		return n > before && dc.Connected() && a.Ready()
	})
	return stop
}

func (c *conformance) ChatKey(i int) string { return "discord:@me:" + c.Fake().DM(people[i].ID) }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	dc := c.server(t)
	return dc.Post(discordtest.Message{Author: people[i], Channel: dc.DM(people[i].ID), Content: text})
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) { c.server(t).Redispatch(ref) }

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	dc := c.server(t)
	return dc.Post(discordtest.Message{Author: people[i], Channel: dc.DM(people[i].ID), Content: text,
		Attachments: []discordtest.Attachment{{Name: name, ContentType: "text/plain", Content: content}}})
}

func (c *conformance) Answers(i int) []string {
	var out []string
	for _, s := range c.Fake().Sent(c.Fake().DM(people[i].ID)) {
		if s.Content != "" {
			out = append(out, strings.TrimSpace(s.Content))
		}
	}
	return out
}

func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	for _, s := range c.Fake().Sent(c.Fake().DM(people[i].ID)) {
		for _, f := range s.Files {
			out[f.Name] = f.Content
		}
	}
	return out
}

func (c *conformance) Approve(t *testing.T, i int) {
	sent := c.Fake().Sent(c.Fake().DM(people[i].ID))
	for k := len(sent) - 1; k >= 0; k-- {
		for _, b := range sent[k].Buttons {
			if strings.HasPrefix(b.Label, "Approve") {
				c.Fake().Press(people[i], "", sent[k].ID, b.CustomID)
				return
			}
		}
	}
	t.Fatal("no question with an Approve button")
}

// What the Discord channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Drafter    = (*Adapter)(nil)
	_ bridge.Speaker    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
)
