package signal

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/signal/signaltest"
	"loadout/chat/chattest"
)

// Signal passes the channel conformance suite against the fake
// signal-cli daemon.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

// The people of the tests: Ana and Bea are allowed (by number), Mallory
// is not; Uma shares no number and is allowed by her account id.
var (
	ana     = signaltest.Person{Number: "+15551230001", UUID: "a0000000-0000-4000-8000-000000000001", Name: "Ana"}
	bea     = signaltest.Person{Number: "+15551230002", UUID: "b0000000-0000-4000-8000-000000000002", Name: "Bea"}
	mallory = signaltest.Person{Number: "+15559990666", UUID: "c0000000-0000-4000-8000-000000000666", Name: "Mallory"}
	uma     = signaltest.Person{UUID: "d0000000-0000-4000-8000-000000000004", Name: "Uma"}
	people  = []signaltest.Person{ana, bea}
)

// testConfig is the channel's config on the fake: polls short, so that a
// stop waits little for the call under way, and no pacing.
func testConfig(fake *signaltest.Server, d bridge.Delivery) Config {
	return Config{RPCURL: fake.URL, Account: signaltest.Account, AllowedNumbers: []string{"+1 555 123-0001", "+15551230002"},
		AllowedUUIDs: []string{strings.ToUpper(uma.UUID)}, PollTimeout: 200 * time.Millisecond, SendPerSecond: -1, Delivery: d,
		sleep: func(ctx context.Context, _ time.Duration) error { return shortSleep(ctx) }}
}

// shortSleep stands for every retry's wait.
func shortSleep(ctx context.Context) error {
	select {
	case <-time.After(10 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// conformance is the suite's harness: Ana's and Bea's direct chats.
type conformance struct {
	bridgetest.Fakes[*signaltest.Server]
}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, FilesIn: true, FilesOut: true}
}

func (c *conformance) server(t *testing.T) *signaltest.Server { return c.For(t, signaltest.New) }

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	fake := c.server(t)
	d := b.Delivery
	d.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	a := New(testConfig(fake, d), bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	return a, run(t, fake, a)
}

// run runs a until the test ends or stop is called, once it is ready.
func run(t testing.TB, fake *signaltest.Server, a *Adapter) (stop func()) {
	t.Helper()
	stop = bridgetest.Running(t, a)
	fake.WaitFor(t, "the channel to be ready", a.Ready)
	return stop
}

// taken waits until signal-cli has handed over every message queued and
// the channel has handled each.
func taken(t testing.TB, fake *signaltest.Server) {
	t.Helper()
	// The channel asks for the next message only once it has handled the
	// last one (stored it, or refused its sender): a receive call begun
	// after the queue ran dry says the last one was handled.
	calls := -1
	bridgetest.WaitFor(t, "the messages to be taken and handled", nil, func() bool {
		switch {
		case fake.Queued() > 0:
			return false
		case calls < 0:
			calls = len(fake.Calls("receive"))
			return false
		}
		return len(fake.Calls("receive")) > calls
	})
}

func (c *conformance) ChatKey(i int) string { return "signal:" + people[i].UUID }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	fake := c.server(t)
	ts := fake.Push(signaltest.Message{From: people[i], Text: text})
	taken(t, fake)
	return strconv.FormatInt(ts, 10)
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) {
	ts, _ := strconv.ParseInt(ref, 10, 64)
	c.server(t).Redeliver(ts)
	taken(t, c.Fake())
}

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	fake := c.server(t)
	ts := fake.Push(signaltest.Message{From: people[i], Text: text, Files: []signaltest.File{{Name: name, Type: "text/plain", Content: content}}})
	taken(t, fake)
	return strconv.FormatInt(ts, 10)
}

func (c *conformance) Answers(i int) []string { return signaltest.Texts(c.Fake().To(people[i])) }

func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range c.Fake().To(people[i]) {
		for _, f := range m.Files {
			out[f.Name] = f.Content
		}
	}
	return out
}

func (c *conformance) Approve(t *testing.T, i int) {
	q, ok := lastQuestion(c.Fake().To(people[i]))
	if !ok {
		t.Fatal("no question was sent")
	}
	c.Fake().React(people[i], "", q.TS, "👍")
	taken(t, c.Fake())
}

// lastQuestion is the last message of msgs that asks for a reaction.
func lastQuestion(msgs []signaltest.Sent) (signaltest.Sent, bool) {
	for k := len(msgs) - 1; k >= 0; k-- {
		if strings.Contains(msgs[k].Text, "react 👍") {
			return msgs[k], true
		}
	}
	return signaltest.Sent{}, false
}

// What the Signal channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Speaker    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
)
