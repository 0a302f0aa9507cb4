package telegram

import (
	"context"
	"errors"
	"testing"

	"loadout/bridge"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

func TestNotifySendsToChatAndTopic(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	var hub bridge.Hub
	hub.Add(New(h.config(nil), nil, h.env.Store), nil)
	if err := hub.Notify(context.Background(), "telegram:42", "hi"); !errors.Is(err, bridge.ErrNotRunning) {
		t.Fatalf("before Run: %v", err)
	}
	a, _ := h.start(h.env, h.config(nil))
	hub.Add(a, nil)
	// Notify needs the channel ready: connected and its inbox resumed.
	chattest.Eventually(t, "ready", a.Ready)
	if err := hub.Notify(context.Background(), "telegram:-100:7", "Your **Google** account is connected."); err != nil {
		t.Fatal(err)
	}
	sent := h.tg.WaitSent(t, 1)
	if sent[0].ChatID != -100 || sent[0].ThreadID != 7 || sent[0].Text != "Your <b>Google</b> account is connected." || sent[0].ParseMode != "HTML" {
		t.Fatalf("sent = %+v", sent[0])
	}
	for _, bad := range []string{"slack:T:C", "telegram:x", "telegram:1:y"} {
		if err := hub.Notify(context.Background(), bad, "x"); err == nil {
			t.Errorf("Notify(%q) accepted", bad)
		}
	}
}
