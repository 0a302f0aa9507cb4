package openai

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/backoff"
	"loadout/config"
	"loadout/tools"
)

var _ tools.Embedder = (*Embeddings)(nil)

// EmbeddingsConfig is the embeddings section: the OpenAI-compatible
// /embeddings that memory, history search and find_tools rank by meaning
// with. Zero values are the documented defaults; an empty Model is off.
type EmbeddingsConfig struct {
	// Model is the embedding model, e.g. text-embedding-3-small or
	// Ollama's nomic-embed-text; empty turns embeddings off.
	Model string `yaml:"model"`
	// BaseURL and APIKey default to llm's.
	BaseURL string `yaml:"base_url" secret:"url"`
	APIKey  string `yaml:"api_key" secret:"true"`
	// Dimensions asks the model for vectors this long (models that
	// allow it: text-embedding-3-*); 0 is the model's own length.
	Dimensions int `yaml:"dimensions"`
	// BatchSize is how many texts one request carries; default 64.
	BatchSize int `yaml:"batch_size"`
	// Timeout bounds one request; default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MinSimilarity is the cosine below which a row is not counted as
	// found by meaning; default 0.3.
	MinSimilarity float64 `yaml:"min_similarity"`
}

// On reports whether embeddings are on.
func (c EmbeddingsConfig) On() bool { return strings.TrimSpace(c.Model) != "" }

// Defaults: a batch's texts, one request's time, the similarity floor,
// and the characters of one text sent (about 2,000 tokens: within every
// embedding model's input).
const (
	DefaultEmbedBatch      = 64
	DefaultEmbedTimeout    = 30 * time.Second
	DefaultMinSimilarity   = 0.3
	MaxEmbedChars          = 8000
	defaultEmbedAttempts   = 2
	defaultEmbedMaxBackoff = 5 * time.Second
)

// WithDefaults fills what c leaves out: llm's base URL and key, the
// batch size, the timeout and the similarity floor.
func (c EmbeddingsConfig) WithDefaults(llm Config) EmbeddingsConfig {
	if c.BaseURL == "" {
		c.BaseURL, c.APIKey = llm.BaseURL, cmp.Or(c.APIKey, llm.APIKey)
	}
	c.BaseURL = cmp.Or(c.BaseURL, DefaultBaseURL)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultEmbedBatch)
	c.Timeout = cmp.Or(c.Timeout, DefaultEmbedTimeout)
	c.MinSimilarity = cmp.Or(c.MinSimilarity, DefaultMinSimilarity)
	return c
}

// Check checks the embeddings section.
func (c EmbeddingsConfig) Check(ch *config.Checker) {
	ch.URL("base_url", c.BaseURL)
	if c.Dimensions < 0 || c.Dimensions > 16384 {
		ch.Bad("dimensions", "must be 0 (the model's own) or a length up to 16384, got %d", c.Dimensions)
	}
	if c.BatchSize < 0 || c.BatchSize > 2048 {
		ch.Bad("batch_size", "must be 1 to 2048 (0: the default, %d), got %d", DefaultEmbedBatch, c.BatchSize)
	}
	ch.Duration("timeout", c.Timeout, time.Second)
	if c.MinSimilarity < 0 || c.MinSimilarity >= 1 {
		ch.Bad("min_similarity", "must be a cosine from 0 up to (not including) 1 (0: the default, %v), got %v", DefaultMinSimilarity, c.MinSimilarity)
	}
	if !c.On() && (c.Dimensions != 0 || c.BaseURL != "") {
		ch.Bad("model", "must be set for the other embeddings keys to mean anything (e.g. text-embedding-3-small, or nomic-embed-text on Ollama); leave the section out to keep search by words")
	}
}

// Usable checks what the embeddings service needs: OpenAI's needs a key.
func (c EmbeddingsConfig) Usable() error {
	if c.On() && needsKey(c.BaseURL, c.APIKey) {
		return fmt.Errorf("config: embeddings.api_key is empty and embeddings.base_url is OpenAI's: set the key (llm.api_key is used when embeddings.base_url is unset)")
	}
	return nil
}

// EmbedOptions are what an Embeddings client is given beside its config.
type EmbedOptions struct {
	// Fallbacks are llm.fallbacks: those naming an embedding model
	// (Fallback.EmbeddingModel) are asked in order when the ones before
	// fail.
	Fallbacks []Fallback
	// Used hears of every answered request: the model, the texts, and
	// the tokens the provider reported (estimated from the texts when it
	// reported none); ctx is the request's, with the Caller charged.
	// Default none. Failed tells of every failed one.
	Used       func(ctx context.Context, model string, texts, tokens int)
	Failed     func(model string, err error)
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Sleep replaces the wait between attempts (tests).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Embeddings is a tools.Embedder over go-openai's CreateEmbeddings. It is
// safe for concurrent use.
type Embeddings struct {
	cfg       EmbeddingsConfig
	opts      EmbedOptions
	providers []embedProvider
	retry     backoff.Policy
}

type embedProvider struct {
	c     *goopenai.Client
	model string
}

// NewEmbeddings returns the client of cfg (with its defaults filled by
// WithDefaults).
func NewEmbeddings(cfg EmbeddingsConfig, opts EmbedOptions) *Embeddings {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	client := func(base, key string) *goopenai.Client {
		oc := goopenai.DefaultConfig(key)
		oc.BaseURL = base
		if opts.HTTPClient != nil {
			oc.HTTPClient = opts.HTTPClient
		}
		return goopenai.NewClientWithConfig(oc)
	}
	e := &Embeddings{cfg: cfg, opts: opts, retry: backoff.Policy{Attempts: defaultEmbedAttempts, Initial: 500 * time.Millisecond, Max: defaultEmbedMaxBackoff, Sleep: opts.Sleep}}
	e.providers = append(e.providers, embedProvider{client(cfg.BaseURL, cfg.APIKey), cfg.Model})
	for _, f := range opts.Fallbacks {
		if f.EmbeddingModel != "" {
			e.providers = append(e.providers, embedProvider{client(f.BaseURL, f.APIKey), f.EmbeddingModel})
		}
	}
	return e
}

// Model is the configured embedding model.
func (e *Embeddings) Model() string { return e.cfg.Model }

// BatchSize is how many texts one request carries.
func (e *Embeddings) BatchSize() int { return e.cfg.BatchSize }

// Embed embeds texts, BatchSize a request, with the first provider that
// answers every batch: each text cut to MaxEmbedChars, each vector
// normalised. An error wraps tools.ErrEmbedding.
func (e *Embeddings) Embed(ctx context.Context, texts []string) (tools.Vectors, error) {
	var errs []error
	refused := true
	for _, p := range e.providers {
		vs, err := e.embedWith(ctx, p, texts)
		if err == nil {
			return tools.Vectors{Model: p.model, Vectors: vs}, nil
		}
		refused = refused && inputRefused(err)
		if e.opts.Failed != nil {
			e.opts.Failed(p.model, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.model, err))
		if ctx.Err() != nil {
			break
		}
	}
	if refused && len(errs) > 0 && ctx.Err() == nil {
		return tools.Vectors{}, fmt.Errorf("%w: %w: %w", tools.ErrEmbedding, tools.ErrEmbeddingRefused, errors.Join(errs...))
	}
	return tools.Vectors{}, fmt.Errorf("%w: %w", tools.ErrEmbedding, errors.Join(errs...))
}

// inputRefused reports whether err is a provider's refusal of the input
// itself: 400, 413 or 422.
func inputRefused(err error) bool {
	var ae *goopenai.APIError
	var re *goopenai.RequestError
	code := 0
	switch {
	case errors.As(err, &ae):
		code = ae.HTTPStatusCode
	case errors.As(err, &re):
		code = re.HTTPStatusCode
	}
	return code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnprocessableEntity
}

func (e *Embeddings) embedWith(ctx context.Context, p embedProvider, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		batch := texts[start:min(len(texts), start+e.cfg.BatchSize)]
		in := make([]string, len(batch))
		chars := 0
		for i, t := range batch {
			in[i] = cut(strings.TrimSpace(t), MaxEmbedChars)
			if in[i] == "" {
				in[i] = "-" // some servers refuse an empty input
			}
			chars += len(in[i])
		}
		var resp goopenai.EmbeddingResponse
		err := e.retry.Do(ctx, func(err error) (bool, time.Duration) { return Transient(err), 0 }, func(ctx context.Context) error {
			actx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
			defer cancel()
			var err error
			resp, err = p.c.CreateEmbeddings(actx, goopenai.EmbeddingRequestStrings{Input: in, Model: goopenai.EmbeddingModel(p.model), Dimensions: e.cfg.Dimensions})
			return err
		})
		if err != nil {
			return nil, err
		}
		vs, err := vectorsOf(resp, len(in))
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
		if e.opts.Used != nil {
			tokens := resp.Usage.PromptTokens
			if tokens <= 0 {
				tokens = chars / 4
			}
			e.opts.Used(ctx, p.model, len(in), tokens)
		}
	}
	return out, nil
}

// vectorsOf checks an answer: one vector per input, by index, all of one
// length, and normalises them.
func vectorsOf(resp goopenai.EmbeddingResponse, n int) ([][]float32, error) {
	if len(resp.Data) != n {
		return nil, fmt.Errorf("the server answered %d vectors for %d texts", len(resp.Data), n)
	}
	vs := make([][]float32, n)
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= n || vs[d.Index] != nil {
			return nil, fmt.Errorf("the server answered a vector of index %d for %d texts", d.Index, n)
		}
		if len(d.Embedding) == 0 || len(d.Embedding) != len(resp.Data[0].Embedding) {
			return nil, fmt.Errorf("the server answered vectors of %d and %d numbers", len(d.Embedding), len(resp.Data[0].Embedding))
		}
		vs[d.Index] = tools.Normalize(d.Embedding)
	}
	return vs, nil
}

// cut is s cut to at most n bytes, at a rune's start.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
