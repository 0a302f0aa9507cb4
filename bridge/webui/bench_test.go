package webui

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// memState is a store's small states in memory.
type memState struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memState) State(_ context.Context, key string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], nil
}

func (s *memState) SetState(_ context.Context, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = value
	return nil
}

func (s *memState) SwapState(_ context.Context, key, old, value string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[key] != old {
		return false, nil
	}
	s.m[key] = value
	return true, nil
}

// What one part costs to keep when a chat's history is full (1 MB of
// answers of 5 KB, more than it keeps): the history is read, trimmed and written whole, so
// the cost is bounded by keepBytes, whatever the chat's length.
func BenchmarkAppendToAFullHistory(b *testing.B) {
	rs := newRooms(&memState{m: map[string]string{}}, nil, slog.New(slog.DiscardHandler))
	rs.open()
	ctx := context.Background()
	part := strings.Repeat("an answer of some length ", 200)
	for range keepEvents {
		if err := rs.append(ctx, "webui:telegram:42", event{Kind: kindAnswer, Text: part}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := rs.append(ctx, "webui:telegram:42", event{Kind: kindAnswer, Text: part}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	h, _ := rs.history(ctx, "webui:telegram:42")
	raw, _ := rs.store.State(ctx, stateKey("webui:telegram:42"))
	b.ReportMetric(float64(len(h.Events)), "events-kept")
	b.ReportMetric(float64(len(raw)), "bytes-kept")
}
