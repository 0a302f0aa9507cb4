package whatsapp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/store/storetest"
)

// Two processes on one database (a file, or PostgreSQL with
// LOADOUT_TEST_DSN) hold answers for one chat at the same instant,
// outside the 24-hour window: notices to a person who last wrote 25
// hours ago. The held list is the store's, a row each, so none is lost:
// all are given when the person writes again. Then both hold more while
// the person writes: each notice reaches the person once, in the
// message that gives the held ones, as itself once the window is open,
// or held for the next message.
func TestHeldAnswersFromTwoProcessesAtOnceLoseNothing(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.env.Model.Fallback = "ok"
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "hello"})
	r.texts(ana, 1)
	idle := func() bool { return bridgetest.Idle(t, r.env.Store, "whatsapp") }
	// Finished before the second process starts, which would otherwise
	// resume it beside the first (the rig has no chat claims).
	bridgetest.Await(t, "the first answer to be done", idle)
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: r.env.DBPath, Model: r.env.Model})
	b := New(r.config(nil), bridge.NewRouter(env2.Engine, "loadout"), env2.Store)
	run(t, r.wa, b)
	var one, two bridge.Hub
	one.Add(r.a, nil)
	two.Add(b, nil)
	ctx := context.Background()
	var notices []string
	notify := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			for name, hub := range map[string]*bridge.Hub{"one": &one, "two": &two} {
				text := fmt.Sprintf("[notice %s-%d-%02d]", name, len(notices), i)
				notices = append(notices, text)
				wg.Go(func() {
					if err := hub.Notify(ctx, chatKey(ana), text); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
	}

	r.ahead.Store(int64(25 * time.Hour))
	notify(8)
	bridgetest.Await(t, "every notice to be held", func() bool {
		h, err := r.a.held(ctx, ana)
		return err == nil && len(h.Parts) == len(notices) && idle()
	})
	if n := len(r.wa.Texts(ana)); n != 1 {
		t.Fatalf("%d messages went out with the window closed: %q", n, r.wa.Texts(ana))
	}
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "I'm back", At: time.Now().Add(25 * time.Hour)})
	got := r.texts(ana, 3)
	for _, text := range notices {
		if strings.Count(got[1], text) != 1 {
			t.Fatalf("the held answers were given as\n%s\nwithout %s once", got[1], text)
		}
	}

	// More held while the person writes; what comes after the take stays
	// for the next message.
	r.ahead.Store(int64(50 * time.Hour))
	var wg sync.WaitGroup
	wg.Go(func() { notify(5) })
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "and again", At: time.Now().Add(50 * time.Hour)})
	wg.Wait()
	bridgetest.Await(t, "the notices to be sent or held", idle)
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "last", At: time.Now().Add(50 * time.Hour)})
	bridgetest.Await(t, "the last answer", func() bool {
		texts := r.wa.Texts(ana)
		return texts[len(texts)-1] == "ok" && strings.Count(strings.Join(texts, "\n"), "ok") >= 4 && idle()
	})
	all := strings.Join(r.wa.Texts(ana), "\n")
	for _, text := range notices {
		if n := strings.Count(all, text); n != 1 {
			t.Fatalf("%s reached the person %d times:\n%s", text, n, all)
		}
	}
	if h, _ := r.a.held(ctx, ana); len(h.Parts) != 0 {
		t.Fatalf("still held: %q", h.Parts)
	}
}

// A message that gave the held answers and is delivered again (Meta
// does, until it hears 200) gives nothing more: what was held since
// waits for the next message, whichever process takes the redelivery.
func TestARedeliveredMessageLeavesWhatWasHeldSince(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.env.Model.Fallback = "ok"
	var hub bridge.Hub
	hub.Add(r.a, nil)
	ctx := context.Background()
	idle := func() bool { return bridgetest.Idle(t, r.env.Store, "whatsapp") }
	r.ahead.Store(int64(25 * time.Hour))
	if err := hub.Notify(ctx, chatKey(ana), "[first notice]"); err != nil {
		t.Fatal(err)
	}
	bridgetest.Await(t, "the notice to be held", idle)
	back := r.wa.Send(t, whatsapptest.Message{From: ana, Text: "I'm back", At: time.Now().Add(25 * time.Hour)})
	if got := r.texts(ana, 2); !strings.Contains(got[0], "[first notice]") {
		t.Fatalf("sent %q", got)
	}
	r.ahead.Store(int64(50 * time.Hour))
	if err := hub.Notify(ctx, chatKey(ana), "[second notice]"); err != nil {
		t.Fatal(err)
	}
	bridgetest.Await(t, "the second notice to be held", func() bool {
		h, err := r.a.held(ctx, ana)
		return err == nil && len(h.Parts) == 1 && idle()
	})
	r.wa.Redeliver(t, back)
	bridgetest.Await(t, "the redelivery to be taken", idle)
	if h, err := r.a.held(ctx, ana); err != nil || len(h.Parts) != 1 || h.Parts[0] != "[second notice]" {
		t.Fatalf("after the redelivery, held %q (%v)", h.Parts, err)
	}
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "again", At: time.Now().Add(50 * time.Hour)})
	got := r.texts(ana, 4)
	if !strings.Contains(got[2], "[second notice]") || strings.Contains(got[2], "[first notice]") {
		t.Fatalf("sent %q", got)
	}
}
