package tools

import (
	"context"
	"testing"
)

// BenchmarkCallArguments is what a call's arguments cost in the
// executor: checked against the schema, decoded into the typed input
// and run (a tool that does nothing), for a mail-sized call.
func BenchmarkCallArguments(b *testing.B) {
	type mailIn struct {
		To      string   `json:"to" reach:"recipients"`
		Cc      string   `json:"cc,omitempty" reach:"recipients"`
		Subject string   `json:"subject"`
		Body    string   `json:"body"`
		Labels  []string `json:"labels,omitempty"`
		Ref     int64    `json:"ref,omitempty"`
	}
	r := NewRegistry()
	if err := r.Add(New(Definition{Name: "mail_draft", Description: "Draft a mail"},
		func(context.Context, mailIn) (any, error) { return "ok", nil })); err != nil {
		b.Fatal(err)
	}
	x := NewExecutor(r, nil)
	calls := []Call{{ID: "1", Name: "mail_draft", Arguments: `{"to":"Ana Lima <ana@example.com>, bob@example.com","cc":"carla@example.org",
		"subject":"Invoice 42 for October","body":"Hi Ana,\nhere is the invoice for October.\nBest,\nBea","labels":["work","invoices"],"ref":1234567890123456789}`}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := x.Run(ctx, nil, calls)[0]; res.Status != StatusSuccess {
			b.Fatal(res.Content)
		}
	}
}
