package chat

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"loadout/tools"
)

// The engine budgets history with Config.Count, a fast estimate. Each
// model call reports the prompt tokens it really cost; the ratio of that
// to the estimate is kept per model and scales the budget, so the
// estimate's error does not turn into overlong or needlessly short
// requests.

// StateStore is an optional Store feature: small named values that
// survive restarts. When the store has it, each model's ratio is kept
// there.
type StateStore interface {
	State(ctx context.Context, key string) (string, error)
	SetState(ctx context.Context, key, value string) error
}

// Observed ratios outside these bounds are not the same count (a server
// that caches prompts, or a fake) and are ignored.
const (
	minRatio = 0.5
	maxRatio = 2.0
)

type ratios struct {
	mu     sync.Mutex
	byName map[string]*ratio
	// schema holds each tool's estimated schema tokens, keyed by name
	// and registry version: a group replaced at run time (an MCP server's
	// new tool list) is estimated again.
	schema    sync.Map // schemaKey → int
	schemaVer atomic.Uint64
}

type schemaKey struct {
	name    string
	version uint64
}

type ratio struct {
	v     float64 // current ratio, reported / estimated
	saved float64 // the value last written to the store
}

func ratioKey(model string) string { return "token_ratio:" + model }

// get returns the model's ratio, read from the store the first time.
func (e *Engine) ratio(ctx context.Context, model string) float64 {
	e.ratios.mu.Lock()
	r, ok := e.ratios.byName[model]
	e.ratios.mu.Unlock()
	if ok {
		return r.v
	}
	r = &ratio{v: 1, saved: 1}
	if st, ok := e.store.(StateStore); ok {
		if s, err := st.State(ctx, ratioKey(model)); err == nil && s != "" {
			if v, err := strconv.ParseFloat(s, 64); err == nil && v >= minRatio && v <= maxRatio {
				r.v, r.saved = v, v
			}
		}
	}
	e.ratios.mu.Lock()
	if have, ok := e.ratios.byName[model]; ok {
		r = have
	} else {
		e.ratios.byName[model] = r
	}
	e.ratios.mu.Unlock()
	return r.v
}

// observe folds one call's reported prompt tokens into the model's ratio
// and keeps it when it moved by more than 5 %.
func (e *Engine) observe(ctx context.Context, model string, estimated, reported int) {
	if estimated <= 0 || reported <= 0 {
		return
	}
	obs := float64(reported) / float64(estimated)
	if obs < minRatio || obs > maxRatio {
		return
	}
	e.ratio(ctx, model) // make sure it is loaded
	e.ratios.mu.Lock()
	r := e.ratios.byName[model]
	r.v = 0.7*r.v + 0.3*obs
	v, save := r.v, r.v > r.saved*1.05 || r.v < r.saved*0.95
	if save {
		r.saved = v
	}
	e.ratios.mu.Unlock()
	if st, ok := e.store.(StateStore); ok && save {
		if err := st.SetState(context.WithoutCancel(ctx), ratioKey(model), strconv.FormatFloat(v, 'f', 4, 64)); err != nil {
			e.cfg.Logger.Warn("could not keep the token ratio", "model", model, "err", err)
		}
	}
}

// schemaTokens estimates what the definitions cost in a request, each
// definition estimated once.
func (e *Engine) schemaTokens(defs []tools.Definition) int {
	ver := e.reg.Version()
	if e.ratios.schemaVer.Swap(ver) != ver {
		e.ratios.schema.Clear() // the earlier version's estimates
	}
	n := 0
	for _, d := range defs {
		k := schemaKey{d.Name, ver}
		if v, ok := e.ratios.schema.Load(k); ok {
			n += v.(int)
			continue
		}
		v := e.cfg.Count(tools.SchemaText(d))
		e.ratios.schema.Store(k, v)
		n += v
	}
	return n
}
