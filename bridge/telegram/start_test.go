package telegram

import (
	"context"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/store/storetest"
)

// The first getUpdates goes out while getMe is still unanswered, so a
// start does not wait a round trip to the Bot API before asking for
// updates; what it brings is taken in only once getMe has answered.
func TestTheFirstPollGoesOutBesideGetMe(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("hello back")
	h.tg.Pause("getMe")
	h.tg.Push(telegramtest.Message{From: ana, Text: "hello"})
	a, _ := h.start(h.env, h.config(nil))
	h.tg.WaitFor(t, "a getUpdates while getMe is held", func() bool { return len(h.tg.Calls("getUpdates")) > 0 })
	if a.Ready() || len(h.tg.Sent()) > 0 || len(h.env.Model.Requests()) > 0 || a.UserName() != "" {
		t.Fatalf("the update was taken before getMe answered: ready %v, sent %d, model asked %d times, name %q",
			a.Ready(), len(h.tg.Sent()), len(h.env.Model.Requests()), a.UserName())
	}
	h.tg.Resume("getMe")
	if s := h.tg.WaitSent(t, 1); s[0].Text != "hello back" {
		t.Fatalf("sent %q", s[0].Text)
	}
	if a.UserName() == "" {
		t.Fatal("no bot name after getMe answered")
	}
}

// A refused token ends Run with an error that names telegram.token, even
// though a getUpdates went out beside getMe, and polling is not retried.
func TestARefusedTokenStopsPolling(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	cfg := h.config(func(c *Config) { c.Token = "123456:WRONG-token" })
	a := New(cfg, bridge.NewRouter(h.env.Engine, "loadout"), h.env.Store)
	a.sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "telegram.token") || ctx.Err() != nil {
		t.Fatalf("Run returned %v (ctx %v), want the token's refusal", err, ctx.Err())
	}
	if n := len(h.tg.Calls("getUpdates")); n > 1 {
		t.Fatalf("%d getUpdates with a refused token, want at most the one beside getMe", n)
	}
	if strings.Contains(h.logs.String(), "getUpdates failed") {
		t.Fatalf("the refused getUpdates was logged as a failure to retry:\n%s", h.logs.String())
	}
}
