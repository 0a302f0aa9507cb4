package bridge_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store/storetest"
)

// Two loadout processes — two engines, their routers and pipelines — on
// one database (a file, or PostgreSQL with LOADOUT_TEST_DSN) take in the
// messages of one chat alternately. With claims every message is
// answered once, in arrival order, and each turn sees the ones before it
// in the conversation's history, whichever engine ran them.
func TestTwoEnginesAnswerAChatInOrder(t *testing.T) {
	model := chattest.NewModelServer(t)
	model.Fallback = "ok"
	one := storetest.NewEnv(t, storetest.Options{Model: model})
	two := storetest.NewEnv(t, storetest.Options{Model: model, DBPath: one.DBPath})
	out := &outlet{}
	p1 := newPipeline(t, bridge.PipelineConfig{Inbox: one.Store, Outlet: out, Handler: bridge.NewRouter(one.Engine, "loadout"),
		Claim: cluster.Claim(one.Store, "one", time.Second, quiet())})
	p2 := newPipeline(t, bridge.PipelineConfig{Inbox: two.Store, Outlet: out, Handler: bridge.NewRouter(two.Engine, "loadout"),
		Claim: cluster.Claim(two.Store, "two", time.Second, quiet())})
	const n = 8
	for i := range n {
		p := p1
		if i%2 == 1 {
			p = p2
		}
		accept(t, p, pending(fmt.Sprintf("ev%d", i), "telegram:42", fmt.Sprintf("m%d", i)))
	}
	out.waitFor(t, n)
	// Stopping runs whatever is still queued: a second answer shows now.
	p1.Stop()
	p2.Stop()
	if got := len(out.got()); got != n {
		t.Fatalf("%d answers to %d messages", got, n)
	}
	reqs := model.Requests()
	if len(reqs) != n {
		t.Fatalf("%d model calls for %d messages", len(reqs), n)
	}
	for i, r := range reqs {
		var users []string
		for _, m := range r.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		var want []string
		for k := 0; k <= i; k++ {
			want = append(want, fmt.Sprintf("m%d", k))
		}
		if !slices.Equal(users, want) {
			t.Fatalf("turn %d saw %v, want %v", i, users, want)
		}
	}
	s, err := one.Store.OpenSession(context.Background(), "telegram:42")
	if err != nil || s.Messages != 2*n {
		t.Fatalf("the session holds %d messages (%v), want %d", s.Messages, err, 2*n)
	}
}
