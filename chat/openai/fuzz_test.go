package openai_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/openai"
)

// FuzzStream feeds any body to the streamed answer's parser as a model
// server's event stream. Whatever it is, the client does not panic or
// hang, and it returns an answer only when the stream said why it ended
// (a finish reason); otherwise an error.
func FuzzStream(f *testing.F) {
	for _, seed := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"The transfer is\"}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"web\",\"arguments\":\"{}\"}}]}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":7,\"function\":{\"arguments\":\"x\"}}]}}]}\n\ndata: [DONE]\n\n",
		"data: [DONE]\n\n",
		"data: {\"choices\":[\n\n",
		": keep-alive\n\nevent: ping\ndata: {}\n\n",
		"data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(body)
		}))
		defer srv.Close()
		c := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "k", Attempts: 1, Timeout: 5 * time.Second,
			Sleep: func(context.Context, time.Duration) error { return nil }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		resp, err := c.Complete(context.Background(), chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Text: "hi"}}, OnText: func(string) {}})
		if err == nil && !bytes.Contains(body, []byte(`"finish_reason"`)) {
			t.Fatalf("an answer from a stream that never finished: %+v", resp)
		}
	})
}
