package chattest

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"loadout/chat/openai"
	"loadout/tools"
)

// EmbedDims is the length of the fake's vectors.
const EmbedDims = 256

// meanings joins words of one meaning that no full-text index joins:
// the fake's whole knowledge of language. Each word stands for the first
// of its line.
var meanings = [][]string{
	{"doctor", "physician", "gp", "medic"},
	{"car", "automobile", "vehicle"},
	{"partner", "spouse", "wife", "husband"},
	{"holiday", "vacation", "getaway"},
	{"apartment", "flat", "home"},
	{"money", "cash", "funds"},
	{"dog", "puppy", "hound"},
	{"job", "employer", "work", "workplace"},
	{"allergic", "allergy", "intolerant"},
	{"film", "movie", "cinema"},
}

// fakeStop are words the fake gives no meaning to.
var fakeStop = map[string]bool{"a": true, "an": true, "the": true, "is": true, "are": true, "my": true, "i": true, "me": true, "who": true,
	"what": true, "of": true, "to": true, "and": true, "in": true, "on": true, "do": true, "you": true, "we": true, "our": true, "for": true,
	"it": true, "was": true, "about": true, "did": true, "does": true, "at": true, "with": true, "be": true, "that": true, "this": true}

// FakeVector is the fake's vector of text under model: a hashed bag of
// its words (each read as the first word of its meaning), normalised.
// Two models hash apart, so their vectors share nothing.
func FakeVector(model, text string) []float32 {
	canon := map[string]string{}
	for _, line := range meanings {
		for _, w := range line {
			canon[w] = line[0]
		}
	}
	v := make([]float32, EmbedDims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if fakeStop[w] {
			continue
		}
		if c, ok := canon[w]; ok {
			w = c
		}
		h := fnv.New64a()
		h.Write([]byte(model + "\x00" + w))
		x := h.Sum64()
		sign := float32(1)
		if x&1 == 1 {
			sign = -1
		}
		v[(x>>1)%EmbedDims] += sign
	}
	return tools.Normalize(v)
}

// EmbeddingsServer is a fake OpenAI-compatible /embeddings answering
// FakeVector for each input, on 127.0.0.1. It counts what it was asked;
// it can be made to fail every request, or refuse inputs with a word.
type EmbeddingsServer struct {
	*httptest.Server
	requests, texts atomic.Int64
	fail            atomic.Bool
	mu              sync.Mutex
	refuse          string
	asked           []string
	// holdAfter, when set, holds every request that comes once this many
	// texts are embedded, until Release or its client leaves.
	holdAfter int64
	held      chan struct{}
	holding   atomic.Int64
}

// HoldAfter holds each request that comes once n texts are embedded,
// until Release or until its client gives up; Holding counts those held
// now.
func (s *EmbeddingsServer) HoldAfter(n int64) {
	s.mu.Lock()
	s.holdAfter, s.held = n, make(chan struct{})
	s.mu.Unlock()
}

// Release lets the held requests go on, and holds no more.
func (s *EmbeddingsServer) Release() {
	s.mu.Lock()
	if s.held != nil {
		close(s.held)
		s.held = nil
	}
	s.mu.Unlock()
}

// Holding is how many requests are held now.
func (s *EmbeddingsServer) Holding() int64 { return s.holding.Load() }

// NewEmbeddingsServer starts the fake, closed when t ends.
func NewEmbeddingsServer(t testing.TB) *EmbeddingsServer {
	s := &EmbeddingsServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *EmbeddingsServer) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/embeddings") {
		http.NotFound(w, r)
		return
	}
	s.requests.Add(1)
	// The body read whole, so that the server notices a client that
	// leaves while its request is held.
	body, err := io.ReadAll(r.Body)
	var req struct {
		Input []string `json:"input"`
		Model string   `json:"model"`
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Model == "" {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	held := s.held
	if held != nil && s.texts.Load() < s.holdAfter {
		held = nil
	}
	s.mu.Unlock()
	if held != nil {
		s.holding.Add(1)
		select {
		case <-held:
		case <-r.Context().Done():
		}
		s.holding.Add(-1)
		if r.Context().Err() != nil {
			return
		}
	}
	if s.fail.Load() {
		http.Error(w, `{"error":{"message":"the fake is down","type":"server_error"}}`, http.StatusServiceUnavailable)
		return
	}
	s.mu.Lock()
	refuse := s.refuse
	s.asked = append(s.asked, req.Input...)
	s.mu.Unlock()
	type datum struct {
		Object    string    `json:"object"`
		Embedding []float32 `json:"embedding"`
		Index     int       `json:"index"`
	}
	var out struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	out.Object, out.Model = "list", req.Model
	for i, in := range req.Input {
		if refuse != "" && strings.Contains(in, refuse) {
			http.Error(w, `{"error":{"message":"input refused","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		out.Data = append(out.Data, datum{"embedding", FakeVector(req.Model, in), i})
		out.Usage.PromptTokens += len(strings.Fields(in))
	}
	s.texts.Add(int64(len(req.Input)))
	out.Usage.TotalTokens = out.Usage.PromptTokens
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// Fail makes every request fail with 503 (true) or be answered again.
func (s *EmbeddingsServer) Fail(on bool) { s.fail.Store(on) }

// Refuse makes requests with an input containing word fail with 400;
// "" refuses none.
func (s *EmbeddingsServer) Refuse(word string) {
	s.mu.Lock()
	s.refuse = word
	s.mu.Unlock()
}

// Requests counts the requests made; Texts the texts embedded.
func (s *EmbeddingsServer) Requests() int64 { return s.requests.Load() }
func (s *EmbeddingsServer) Texts() int64    { return s.texts.Load() }

// Asked is every input asked for, in order.
func (s *EmbeddingsServer) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// Client is an openai.Embeddings of model on the fake, quick to give up.
func (s *EmbeddingsServer) Client(model string, opts openai.EmbedOptions) *openai.Embeddings {
	cfg := openai.EmbeddingsConfig{Model: model, BaseURL: s.URL + "/v1", APIKey: "test"}.WithDefaults(openai.Config{})
	if opts.Sleep == nil {
		opts.Sleep = func(context.Context, time.Duration) error { return nil }
	}
	return openai.NewEmbeddings(cfg, opts)
}
