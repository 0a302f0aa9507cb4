package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"loadout/chat"
	"loadout/chat/openai"
	"loadout/store"
	"loadout/tools"
)

// embedding is search by meaning's wiring: the client of the embeddings
// section, what the store was given, and what it cost since start.
type embedding struct {
	client  *openai.Embeddings
	meaning *store.Meaning
	// requests and tokens count the answered requests since start.
	requests, tokens atomic.Int64
}

// wireEmbeddings turns search by meaning on when the embeddings section
// names a model: the client (with the fallbacks that name an embedding
// model), the store's searches and job. Off, nothing of it exists and
// a.embedder is nil.
func (a *app) wireEmbeddings() {
	cfg := a.cfg.EmbeddingsConfig()
	if !cfg.On() {
		return
	}
	e := &embedding{}
	e.client = openai.NewEmbeddings(cfg, openai.EmbedOptions{
		Fallbacks: a.cfg.LLM.Failover.Fallbacks, HTTPClient: a.api, Logger: a.log.With("part", "embeddings"),
		Used: func(ctx context.Context, model string, texts, tokens int) {
			e.requests.Add(1)
			e.tokens.Add(int64(tokens))
			a.metrics.Embedded(model, texts, tokens)
			a.chargeEmbedding(ctx, model, tokens)
		},
		Failed: func(model string, err error) { a.metrics.EmbedFailed(model) },
	})
	var keep []string
	for _, f := range a.cfg.LLM.Failover.Fallbacks {
		if f.EmbeddingModel != "" {
			keep = append(keep, f.EmbeddingModel)
		}
	}
	e.meaning = &store.Meaning{Embedder: e.client, Model: cfg.Model, Keep: keep, BatchSize: cfg.BatchSize,
		MinSimilarity: cfg.MinSimilarity, Logger: a.log.With("part", "embeddings")}
	a.db.SetMeaning(e.meaning)
	a.embed = e
}

// embedder is what find_tools ranks by meaning with: nil while
// embeddings are off.
func (a *app) embedder() tools.Embedder {
	if a.embed == nil {
		return nil
	}
	return a.embed.client
}

// chargeEmbedding counts an embeddings request against the caps of the
// person (and chat) it served, at llm.prices' price of the embedding
// model; the tool index's, which serves nobody, is counted in /metrics
// and /status only.
func (a *app) chargeEmbedding(ctx context.Context, model string, tokens int) {
	c := tools.CallerFrom(ctx)
	if c.UserKey == "" || a.engine == nil {
		return
	}
	if _, err := a.engine.Charge(ctx, c.UserKey, c.ChatKey, model, chat.Usage{PromptTokens: tokens}); err != nil {
		a.log.Warn("the spend of an embeddings request was not counted", "err", err)
	}
}

// runEmbeddings runs the embedding job until ctx ends, in the one
// process of those sharing the database that holds its lease; nothing
// while embeddings are off.
func (a *app) runEmbeddings(ctx context.Context) error {
	if a.embed == nil {
		return nil
	}
	return a.exclusive.Do(ctx, "embeddings", a.db.RunEmbeddings)
}

// meaningStatus is search by meaning's state for /status and the
// console's overview: "" while embeddings are off.
func (a *app) meaningStatus(ctx context.Context) string {
	if a.embed == nil {
		return ""
	}
	p, err := a.db.EmbedProgress(ctx)
	if err != nil {
		return fmt.Sprintf("%s; its progress could not be read", a.embed.client.Model())
	}
	line := fmt.Sprintf("%s, %d of %d memories and messages embedded", p.Model, p.Done, p.Total)
	if p.Total > 0 && p.Done < p.Total {
		line += fmt.Sprintf(" (%d%%; the rest are found by words until then)", p.Done*100/p.Total)
	}
	if p.Problem != "" {
		line += "; the embeddings service is failing, tried again shortly"
	}
	if p.Skipped > 0 {
		line += fmt.Sprintf("; %d refused by the service, found by words only", p.Skipped)
	}
	return line + fmt.Sprintf("; %d requests, %d tokens since start", a.embed.requests.Load(), a.embed.tokens.Load())
}
