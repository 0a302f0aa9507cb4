package telegram

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store/storetest"
)

// Two processes with one bot on one database: only the lease holder calls
// getUpdates (Telegram allows one); when it is killed, the other takes
// the polling over once the lease expires, and answers.
func TestOnlyOneProcessPolls(t *testing.T) {
	const ttl = 300 * time.Millisecond
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := newHarness(t, storetest.Options{})
	b := newHarness(t, storetest.Options{DBPath: a.env.DBPath})
	exclusive := func(h *harness, s cluster.Store, holder string) Config {
		return h.config(func(c *Config) { c.Exclusive = cluster.Exclusive(s, holder, ttl, quiet) })
	}
	_, stopA := a.start(a.env, exclusive(a, bridgetest.Dies{Store: a.env.Store}, "a"))
	a.tg.WaitFor(t, "a to poll", func() bool { return len(a.tg.Calls("getUpdates")) > 0 })
	var refused atomic.Int32
	adB, _ := b.start(b.env, exclusive(b, bridgetest.Refusals{Store: b.env.Store, N: &refused}, "b"))
	chattest.Eventually(t, "b to be ready", adB.Ready)
	// b has tried for the lease, and been refused it, twice.
	chattest.Eventually(t, "b to be refused the lease twice", func() bool { return refused.Load() >= 2 })
	if n := len(b.tg.Calls("getUpdates")); n != 0 {
		t.Fatalf("b polled %d times while a held the lease", n)
	}
	stopA()
	b.env.Model.Text("b here")
	b.tg.Push(telegramtest.Message{From: ana, Text: "anyone?"})
	if sent := b.tg.WaitSent(t, 1); sent[0].Text != "b here" {
		t.Fatalf("b answered %q", sent[0].Text)
	}
}
