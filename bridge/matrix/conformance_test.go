package matrix

import (
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/matrix/matrixtest"
	"loadout/store/storetest"
)

// Matrix passes the channel conformance suite against Dendrite, with a
// mautrix client as each person, in unencrypted rooms and in encrypted
// ones (the latter with the goolm build tag).
func TestConformance(t *testing.T) {
	t.Run("unencrypted", func(t *testing.T) { bridgetest.Run(t, &conformance{}) })
	t.Run("encrypted", func(t *testing.T) {
		if !matrixtest.Encryption() {
			t.Skip("end-to-end encryption needs the goolm build tag (go test -tags sqlite_fts5,goolm)")
		}
		bridgetest.Run(t, &conformance{encrypted: true})
	})
}

// conformance is the suite's harness: Ana's and Bea's direct chats with
// the bot, in a world of the running test.
type conformance struct {
	encrypted bool

	mu    sync.Mutex
	w     *world
	env   *storetest.Env
	owner *testing.T
}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, Stream: true, FilesIn: true, FilesOut: true}
}

// world is the running test's, shared by its processes.
func (c *conformance) world(t *testing.T) *world {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner != t {
		c.w, c.owner = newWorld(t, c.encrypted), t
	}
	return c.w
}

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	w := c.world(t)
	cfg := w.config(b.Delivery)
	cfg.Stream = b.Stream
	c.mu.Lock()
	c.env = b.Env
	c.mu.Unlock()
	return w.start(t, b.Env, cfg)
}

func (c *conformance) ChatKey(i int) string { return chatKey(c.w.rooms[i], "") }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	ev := c.world(t).say(t, i, text)
	inInbox(t, c.env, "event:"+string(ev))
	return string(ev)
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) { c.world(t).tr.redeliver(t, ref) }

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	ev := c.world(t).share(t, i, name, content, text)
	inInbox(t, c.env, "event:"+string(ev))
	return string(ev)
}

func (c *conformance) Answers(i int) []string { return c.w.answers(i) }

// Uploads waits a while for the bot's files to reach the person, then
// downloads them.
func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	p := c.w.people[i]
	deadline := time.Now().Add(bridgetest.Wait)
	for len(out) == 0 && time.Now().Before(deadline) {
		for _, evt := range p.Events(c.w.rooms[i]) {
			m := evt.Content.AsMessage()
			if evt.Sender != c.w.bot || evt.Type != event.EventMessage || m == nil || !m.MsgType.IsMedia() {
				continue
			}
			if data, err := p.Download(m); err == nil {
				out[m.GetFileName()] = data
			}
		}
		if len(out) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return out
}

func (c *conformance) Approve(t *testing.T, i int) {
	w := c.world(t)
	w.react(t, w.people[i], i, w.lastQuestion(t, i), reactApprove)
}

func (c *conformance) Hold(n int) { c.w.tr.hold(n) }

func (c *conformance) Held() int {
	c.w.tr.mu.Lock()
	defer c.w.tr.mu.Unlock()
	return c.w.tr.waiting
}

func (c *conformance) Release() { c.w.tr.releaseAll(c.owner) }

// What the Matrix channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Drafter    = (*Adapter)(nil)
	_ bridge.Speaker    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
)
