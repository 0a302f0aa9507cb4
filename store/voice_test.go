package store

import (
	"context"
	"testing"

	"loadout/bridge"
	"loadout/voice"
)

// A voice note, its transcript and the answer's spoken text are kept with
// the inbox item and read back after a reopen, as after a restart.
func TestInboxKeepsTheVoiceNote(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	p := pend("update:7", "telegram:1", "a caption")
	p.Voice = &bridge.VoiceNote{File: "voice-1.ogg", Seconds: 4}
	it, _, err := db.Accept(ctx, "telegram", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Transcribed(ctx, it.Seq, bridge.VoiceNote{File: "voice-1.ogg", Seconds: 4, Transcript: "call mum", Echoed: true}); err != nil {
		t.Fatal(err)
	}
	if err := db.Answer(ctx, it.Seq, bridge.Answer{Parts: []string{"Calling."}, Asks: []bridge.Question{{Part: 0, ID: "a1"}}, Speech: "Calling."}); err != nil {
		t.Fatal(err)
	}
	items, err := db.Unfinished(ctx, "telegram")
	if err != nil || len(items) != 1 {
		t.Fatalf("%d items, %v", len(items), err)
	}
	got := items[0]
	if got.Voice == nil || *got.Voice != (bridge.VoiceNote{File: "voice-1.ogg", Seconds: 4, Transcript: "call mum", Echoed: true}) ||
		got.Speech != "Calling." || len(got.Asks) != 1 || got.Asks[0].ID != "a1" || got.Inbound.Text != "a caption" {
		t.Fatalf("read back %+v voice %+v", got, got.Voice)
	}
}

// What voice costs adds up per chat, in one statement on either
// database.
func TestVoiceUsageAddsUpPerChat(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	for _, add := range []voice.Spent{{Notes: 1, Seconds: 12}, {Notes: 1, Seconds: 30}, {Chars: 800}} {
		if err := db.AddVoiceUsage(ctx, "telegram:1", add); err != nil {
			t.Fatal(err)
		}
	}
	db.AddVoiceUsage(ctx, "telegram:2", voice.Spent{Notes: 1, Seconds: 5})
	u, err := db.VoiceUsage(ctx, "telegram:1")
	if err != nil || u != (voice.Spent{Notes: 2, Seconds: 42, Chars: 800}) {
		t.Fatalf("usage %+v, %v", u, err)
	}
	if u, _ := db.VoiceUsage(ctx, "telegram:3"); u != (voice.Spent{}) {
		t.Fatalf("a chat without voice: %+v", u)
	}
}
