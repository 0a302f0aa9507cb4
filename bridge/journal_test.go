package bridge_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"loadout/bridge"
	"loadout/chat"
)

// A pipeline that stops leaves in its journal only the parts the inbox
// has not recorded: after a clean stop every one was, so the next start
// has nothing to apply (it applied every line before, one inbox write
// each, however long ago it was recorded).
func TestStopLeavesTheJournalEmpty(t *testing.T) {
	db, _ := openStore(t)
	path := filepath.Join(t.TempDir(), "sent-test.journal")
	j, err := bridge.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	out := &outlet{}
	p := newPipeline(t, bridge.PipelineConfig{Inbox: db, Outlet: out, Journal: j,
		Handler: handlerFunc(func(ctx context.Context, in chat.Inbound) (string, error) {
			return "one|two", nil
		})})
	for _, id := range []string{"ev1", "ev2", "ev3"} {
		accept(t, p, pending(id, id, "hi"))
	}
	out.waitFor(t, 6)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("journal before the stop: %v, %v", st, err)
	}
	p.Stop()
	if st, err := os.Stat(path); err != nil || st.Size() != 0 {
		t.Fatalf("journal after the stop: %d bytes, %v; want none", st.Size(), err)
	}
}
