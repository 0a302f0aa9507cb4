package irc

import (
	"sync"
	"testing"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
)

// IRC passes the channel conformance suite on a real network (InspIRCd
// with Anope), with a raw client as each person, signed in to their
// account. IRC delivers nothing twice, has no buttons, files or edits:
// those cases do not apply.
func TestConformance(t *testing.T) { bridgetest.Run(t, &conformance{}) }

// conformance is the suite's harness: Ana's and Bea's private chats with
// the bot, in a world of the running test.
type conformance struct {
	mu    sync.Mutex
	w     *world
	owner *testing.T
}

func (c *conformance) Caps() bridgetest.Caps { return bridgetest.Caps{Chats: 2, Hold: true} }

func (c *conformance) world(t *testing.T) *world {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner != t {
		c.w, c.owner = newWorld(t), t
	}
	return c.w
}

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	w := c.world(t)
	return w.start(t, b.Env, w.config(b.Delivery))
}

func (c *conformance) ChatKey(i int) string { return "irc:" + []string{"ana", "bea"}[i] }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	c.world(t).say(t, i, text)
	return ""
}

func (c *conformance) Redeliver(t *testing.T, _ int, _ string) { t.Fatal("IRC delivers nothing again") }

func (c *conformance) SendFile(t *testing.T, _ int, _ string, _ []byte, _ string) string {
	t.Fatal("IRC carries no files")
	return ""
}

func (c *conformance) Answers(i int) []string { return c.w.answers(i) }

func (c *conformance) Uploads(int) map[string][]byte { return nil }

// Approve types the approval, with the question's code, as the person
// asked.
func (c *conformance) Approve(t *testing.T, i int) {
	w := c.world(t)
	q := code(t, w.answers(i))
	w.sayAs(t, i, "!approve "+q, "/approve "+q)
}

func (c *conformance) Hold(n int) { c.w.hold.Hold(n) }

func (c *conformance) Release() { c.w.hold.Release(c.owner) }

func (c *conformance) Held() int { return c.w.hold.Gate.Waiting(holdKey) }
