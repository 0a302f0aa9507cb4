package settings

import (
	"context"
	"log/slog"
	"net/http"

	"loadout/chat/openai"
	"loadout/store"
)

// EmbedMeter hears of embeddings requests (metrics.Metrics is one).
type EmbedMeter interface {
	Embedded(model string, texts, tokens int)
	EmbedFailed(model string)
}

// Meaning is search by meaning as the embeddings section configures it:
// the client of its service (with the fallbacks of llm.fallbacks that
// name an embedding_model), each answered request counted by meter and
// charged by charge (the context's caller, at the model's price); nil
// while embeddings.model is empty.
func (c Config) Meaning(log *slog.Logger, hc *http.Client, meter EmbedMeter, charge func(ctx context.Context, model string, tokens int)) *store.Meaning {
	cfg := c.EmbeddingsConfig()
	if !cfg.On() {
		return nil
	}
	log = log.With("part", "embeddings")
	m := &store.Meaning{Model: cfg.Model, BatchSize: cfg.BatchSize, MinSimilarity: cfg.MinSimilarity, Logger: log}
	for _, f := range c.LLM.Failover.Fallbacks {
		if f.EmbeddingModel != "" {
			m.Keep = append(m.Keep, f.EmbeddingModel)
		}
	}
	m.Embedder = openai.NewEmbeddings(cfg, openai.EmbedOptions{
		Fallbacks: c.LLM.Failover.Fallbacks, HTTPClient: hc, Logger: log,
		Used: func(ctx context.Context, model string, texts, tokens int) {
			m.Counted(tokens)
			meter.Embedded(model, texts, tokens)
			charge(ctx, model, tokens)
		},
		Failed: func(model string, _ error) { meter.EmbedFailed(model) },
	})
	return m
}
