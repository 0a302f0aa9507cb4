package openai_test

import (
	"context"
	"errors"
	"testing"

	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/tools"
)

// Embeddings go to the first service that answers, among llm's and the
// fallbacks that name an embedding model, and say whose model made
// them; every answered request is counted once with its tokens.
func TestEmbeddingsFailOverOnlyToFallbacksWithAnEmbeddingModel(t *testing.T) {
	primary, named, unnamed := chattest.NewEmbeddingsServer(t), chattest.NewEmbeddingsServer(t), chattest.NewEmbeddingsServer(t)
	var used []string
	var tokens int
	e := primary.Client("main-embed", openai.EmbedOptions{
		Fallbacks: []openai.Fallback{{BaseURL: unnamed.URL + "/v1", Model: "chat-only"}, {BaseURL: named.URL + "/v1", EmbeddingModel: "spare-embed"}},
		Used:      func(_ context.Context, model string, texts, n int) { used = append(used, model); tokens += n },
	})
	ctx := context.Background()
	v, err := e.Embed(ctx, []string{"my physician", "a doctor"})
	if err != nil || v.Model != "main-embed" || len(v.Vectors) != 2 || tools.Dot(v.Vectors[0], v.Vectors[1]) < 0.4 {
		t.Fatalf("from llm's service: %+v %v", v.Model, err)
	}
	primary.Fail(true)
	v, err = e.Embed(ctx, []string{"my physician"})
	if err != nil || v.Model != "spare-embed" {
		t.Fatalf("with llm's service down: %q %v", v.Model, err)
	}
	if unnamed.Requests() != 0 {
		t.Errorf("a fallback without an embedding model was asked %d times", unnamed.Requests())
	}
	named.Fail(true)
	if _, err := e.Embed(ctx, []string{"x"}); !errors.Is(err, tools.ErrEmbedding) {
		t.Errorf("every service down: %v", err)
	}
	if len(used) != 2 || used[0] != "main-embed" || used[1] != "spare-embed" || tokens != 6 {
		t.Errorf("counted %v, %d tokens", used, tokens)
	}
}

// A batch larger than batch_size goes in several requests, in order.
func TestEmbeddingsBatches(t *testing.T) {
	fake := chattest.NewEmbeddingsServer(t)
	cfg := openai.EmbeddingsConfig{Model: "m", BaseURL: fake.URL + "/v1", BatchSize: 2}.WithDefaults(openai.Config{})
	e := openai.NewEmbeddings(cfg, openai.EmbedOptions{})
	texts := []string{"doctor", "car", "film", "dog", "cash"}
	v, err := e.Embed(context.Background(), texts)
	if err != nil || len(v.Vectors) != 5 || fake.Requests() != 3 {
		t.Fatalf("%d vectors in %d requests: %v", len(v.Vectors), fake.Requests(), err)
	}
	for i, text := range texts {
		if tools.Dot(v.Vectors[i], chattest.FakeVector("m", text)) < 0.99 {
			t.Errorf("vector %d is not %q's", i, text)
		}
	}
}
