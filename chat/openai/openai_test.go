package openai_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/chat/openai"
)

// waits records the waits between attempts without sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return ctx.Err()
}

func client(m *chattest.ModelServer, w *waits) *openai.Client {
	return openai.New(openai.Config{
		BaseURL: m.URL, APIKey: "k", Attempts: 4, Backoff: 100 * time.Millisecond, MaxBackoff: 3 * time.Second,
		Sleep: w.sleep, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func TestRetryWaitsGrowAndHonourRetryAfter(t *testing.T) {
	m := chattest.NewModelServer(t)
	m.Fail(http.StatusBadGateway)
	m.Push(chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}},
		Body: `{"error":{"message":"slow down","type":"rate_limit"}}`})
	m.Fail(http.StatusServiceUnavailable)
	m.Text("hello")
	var w waits
	resp, err := client(m, &w).Complete(context.Background(), chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Text: "hi"}}})
	if err != nil || resp.Text != "hello" {
		t.Fatalf("Complete = %q, %v; want hello", resp.Text, err)
	}
	// 100ms, then the server's 2s (not advancing the schedule), then 200ms.
	want := []time.Duration{100 * time.Millisecond, 2 * time.Second, 200 * time.Millisecond}
	if len(w.d) != len(want) {
		t.Fatalf("waits = %v, want %v", w.d, want)
	}
	for i := range want {
		if w.d[i] != want[i] {
			t.Fatalf("waits = %v, want %v", w.d, want)
		}
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	m := chattest.NewModelServer(t)
	m.Push(chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}},
		Body: `{"error":{"message":"slow down"}}`})
	m.Text("ok")
	var w waits
	if _, err := client(m, &w).Complete(context.Background(), chat.Request{Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if len(w.d) != 1 || w.d[0] != 3*time.Second {
		t.Fatalf("waits = %v, want [3s]", w.d)
	}
}

func TestFinalErrorsAreNotRetried(t *testing.T) {
	m := chattest.NewModelServer(t)
	m.Fail(http.StatusBadRequest)
	var w waits
	_, err := client(m, &w).Complete(context.Background(), chat.Request{Model: "m"})
	if err == nil || len(m.Requests()) != 1 || len(w.d) != 0 {
		t.Fatalf("err = %v after %d requests and waits %v; want one request, no wait", err, len(m.Requests()), w.d)
	}
}

func TestAttemptsAreBounded(t *testing.T) {
	m := chattest.NewModelServer(t)
	for range 6 {
		m.Fail(http.StatusInternalServerError)
	}
	var w waits
	_, err := client(m, &w).Complete(context.Background(), chat.Request{Model: "m"})
	if err == nil || len(m.Requests()) != 4 || len(w.d) != 3 {
		t.Fatalf("err = %v after %d requests, %d waits; want 4 requests, 3 waits", err, len(m.Requests()), len(w.d))
	}
}

// A streamed answer reaches OnText as it grows and ends as the same
// response an unstreamed call gives: text, tool calls put together from
// their pieces, usage.
func TestStreamedAnswer(t *testing.T) {
	m := chattest.NewModelServer(t)
	m.Push(chattest.Step{Text: "Hello there, friend.", Usage: chat.Usage{PromptTokens: 7, CompletionTokens: 3}})
	m.Push(chattest.Step{Text: "Looking.", Calls: []chat.ToolCall{{ID: "c1", Name: "web", Arguments: `{"action":"search","query":"go"}`}, {Name: "get_current_time", Arguments: `{}`}}})
	var w waits
	c := client(m, &w)
	var seen []string
	resp, err := c.Complete(context.Background(), chat.Request{
		Messages: []chat.Message{{Role: chat.RoleUser, Text: "hi"}},
		OnText:   func(text string) { seen = append(seen, text) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hello ", "Hello there, ", "Hello there, friend."}; !slices.Equal(seen, want) {
		t.Errorf("OnText saw %q, want %q", seen, want)
	}
	if resp.Text != "Hello there, friend." || resp.Usage != (chat.Usage{PromptTokens: 7, CompletionTokens: 3}) {
		t.Errorf("response %+v", resp)
	}
	if !m.Last(t).Stream {
		t.Error("the request did not ask to stream")
	}
	resp, err = c.Complete(context.Background(), chat.Request{
		Messages: []chat.Message{{Role: chat.RoleUser, Text: "hi"}}, OnText: func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Looking." || len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "c1" ||
		resp.ToolCalls[0].Arguments != `{"action":"search","query":"go"}` || resp.ToolCalls[1].Name != "get_current_time" || resp.ToolCalls[1].Arguments != `{}` {
		t.Errorf("tool calls put together wrong: %+v", resp)
	}
}

// Found by probing: a stream cut after one chunk was shown and stored as
// the whole answer, and a complete tool call in a cut stream would run.
// An answer that ends without its finish reason (streamed) or mid-JSON
// (plain) is a transient failure: retried, and never returned as an
// answer.
func TestCutAnswersAreRetriedNotTaken(t *testing.T) {
	for _, streamed := range []bool{true, false} {
		m := chattest.NewModelServer(t)
		m.Push(chattest.Step{Text: "The transfer is", Cut: true})
		m.Push(chattest.Step{Text: "Sending.", Calls: []chat.ToolCall{{Name: "http_request", Arguments: `{"method":"POST","url":"https://bank.example/transfer"}`}}, Cut: true})
		m.Push(chattest.Step{Text: "The whole answer."})
		var w waits
		req := chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Text: "hi"}}}
		if streamed {
			req.OnText = func(string) {}
		}
		resp, err := client(m, &w).Complete(context.Background(), req)
		if err != nil || resp.Text != "The whole answer." || len(resp.ToolCalls) != 0 || len(m.Requests()) != 3 {
			t.Errorf("streamed %v: %+v, %v after %d requests", streamed, resp, err, len(m.Requests()))
		}
		// Only cut answers: the failure, never a part.
		m2 := chattest.NewModelServer(t)
		for range 4 {
			m2.Push(chattest.Step{Text: "Partial", Calls: []chat.ToolCall{{Name: "web", Arguments: `{}`}}, Cut: true})
		}
		if resp, err := client(m2, &w).Complete(context.Background(), req); err == nil || resp.Text != "" || len(resp.ToolCalls) != 0 {
			t.Errorf("streamed %v, every answer cut: %+v, %v", streamed, resp, err)
		}
	}
}
