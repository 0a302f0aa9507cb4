package tools

import (
	"context"
	"strings"
	"sync"
	"time"
)

// meaningIndex is the tools' vectors for find_tools: each tool's text
// (name, description, examples) embedded when it changes, with the model
// that made it; a request's vector is compared only with vectors of its
// own model.
type meaningIndex struct {
	emb     Embedder
	mu      sync.Mutex
	texts   map[string]string
	vectors map[string][]float32
	models  map[string]string
	// retryAt is when the embedder may be asked again after it failed.
	retryAt time.Time
}

// The blend of find_tools' two rankings, chosen on the tuning half of
// cmd/loadout/testdata/find_requests.tsv (docs/BENCHMARKS.md):
const (
	// meaningWeight is what the tool nearest in meaning adds, against
	// the best word score's 1.
	meaningWeight = 0.1
	// meaningFloor is the cosine under which a tool gains nothing.
	meaningFloor = 0.1
	// meaningRetry is how long find_tools ranks by words alone after the
	// embedder failed.
	meaningRetry = time.Minute
	// meaningWait bounds what find_tools waits for the service.
	meaningWait = 2 * time.Second
)

// nearest is each tool's cosine with q, or nil when find_tools ranks by
// words alone (no embedder, or it failed: then for meaningRetry). The
// tools whose text changed since they were last embedded are embedded
// first, in one call.
func (ix *searchIndex) nearest(ctx context.Context, q string) map[string]float32 {
	m := &ix.meaning
	if m.emb == nil {
		return nil
	}
	// A service that hangs leaves find_tools to words in good time.
	ctx, cancel := context.WithTimeout(ctx, meaningWait)
	defer cancel()
	ix.mu.Lock()
	ix.fresh()
	texts := make(map[string]string, len(ix.docs))
	for _, d := range ix.docs {
		texts[d.name] = d.text
	}
	ix.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Now().Before(m.retryAt) {
		return nil
	}
	if m.texts == nil {
		m.texts, m.vectors, m.models = map[string]string{}, map[string][]float32{}, map[string]string{}
	}
	var names, changed []string
	for name, text := range texts {
		if m.texts[name] != text {
			names, changed = append(names, name), append(changed, text)
		}
	}
	for name := range m.texts {
		if _, ok := texts[name]; !ok {
			delete(m.texts, name)
			delete(m.vectors, name)
			delete(m.models, name)
		}
	}
	if len(changed) > 0 {
		v, err := m.emb.Embed(ctx, changed)
		if err != nil || len(v.Vectors) != len(changed) {
			m.retryAt = time.Now().Add(meaningRetry)
			return nil
		}
		for i, name := range names {
			m.texts[name], m.vectors[name], m.models[name] = changed[i], v.Vectors[i], v.Model
		}
	}
	v, err := m.emb.Embed(ctx, []string{q})
	if err != nil || len(v.Vectors) != 1 {
		m.retryAt = time.Now().Add(meaningRetry)
		return nil
	}
	sims := make(map[string]float32, len(m.vectors))
	for name, vec := range m.vectors {
		if m.models[name] == v.Model {
			sims[name] = Dot(v.Vectors[0], vec)
		}
	}
	return sims
}

// blend adds meaning to the word hits: each score becomes its share of
// the best, plus meaningWeight times the tool's share of the best cosine
// above meaningFloor; a tool no word found comes in by meaning alone.
// ix.mu held.
func (ix *searchIndex) blend(hits []hit, sims map[string]float32, allowed func(name, group string) bool) []hit {
	best := 0.0
	for _, h := range hits {
		best = max(best, h.score)
	}
	bestSim := float32(meaningFloor)
	for _, s := range sims {
		bestSim = max(bestSim, s)
	}
	share := func(name string) float64 {
		if bestSim <= meaningFloor {
			return 0
		}
		return float64(max(0, sims[name]-meaningFloor) / (bestSim - meaningFloor))
	}
	seen := make(map[string]bool, len(hits))
	for i := range hits {
		seen[hits[i].name] = true
		if best > 0 {
			hits[i].score /= best
		}
		hits[i].score += meaningWeight * share(hits[i].name)
	}
	for _, d := range ix.docs {
		if seen[d.name] || share(d.name) <= 0 || !allowed(d.name, d.group) {
			continue
		}
		hits = append(hits, hit{d.name, d.group, d.desc, meaningWeight * share(d.name)})
	}
	return hits
}

// meaningText is what a tool is embedded as: its name in words, its
// description and its example requests.
func meaningText(d Definition) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(d.Name, "_", " "))
	b.WriteString(": ")
	b.WriteString(d.Description)
	for _, e := range d.Examples {
		b.WriteString("; ")
		b.WriteString(e)
	}
	return b.String()
}
