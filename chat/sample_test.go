package chat_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"loadout/chat"
)

// A server's sampling request runs on the chat's model with the server's
// system prompt and bound, and its tokens count in the chat's session; a
// request larger than the history budget is refused before it reaches
// the model.
func TestSampleRunsOnTheModelAndCounts(t *testing.T) {
	e := newEnv(t, chat.Config{HistoryTokens: 2000})
	e.Model.Text("a short summary")
	text, _, err := e.Engine.Sample(context.Background(), "c1", "u", chat.Sampling{System: "You summarize.", MaxTokens: 30,
		Messages: []chat.Message{{Role: chat.RoleUser, Text: "Summarize: tides"}}})
	if err != nil || text != "a short summary" {
		t.Fatalf("Sample = %q, %v", text, err)
	}
	req := e.Model.Last(t)
	if req.Messages[0].Content != "You summarize." || req.Messages[1].Content != "Summarize: tides" || req.MaxTokens != 30 || len(req.Tools) != 0 {
		t.Fatalf("request = %+v", req)
	}
	st, err := e.Engine.Status(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Usage.PromptTokens+st.Usage.CompletionTokens == 0 {
		t.Fatalf("the sampling's tokens were not counted: %+v", st.Usage)
	}
	n := len(e.Model.Requests())
	_, _, err = e.Engine.Sample(context.Background(), "c1", "u", chat.Sampling{Messages: []chat.Message{{Role: chat.RoleUser, Text: strings.Repeat("tides and moons ", 2000)}}})
	if !errors.Is(err, chat.ErrSamplingTooLarge) || len(e.Model.Requests()) != n {
		t.Fatalf("a request past the budget = %v (%d model requests)", err, len(e.Model.Requests())-n)
	}
}
