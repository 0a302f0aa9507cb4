package bridge_test

import (
	"context"
	"testing"

	"loadout/bridge"
)

func TestOutboxRoutesByPrefix(t *testing.T) {
	var o bridge.Outbox
	if err := o.Notify(context.Background(), "telegram:1", "x"); err == nil {
		t.Fatal("an empty outbox delivered")
	}
	var got string
	o.Add("telegram", func(_ context.Context, k, text string) error { got = k + "|" + text; return nil })
	if err := o.Notify(context.Background(), "telegram:1:7", "hi"); err != nil || got != "telegram:1:7|hi" {
		t.Fatalf("got %q, %v", got, err)
	}
	if err := o.Notify(context.Background(), "slack:T:C", "hi"); err == nil {
		t.Fatal("delivered to a channel that is not registered")
	}
}
