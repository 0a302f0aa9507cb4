package tools

import (
	"context"
	"sync"
)

// memo holds what one call looked up, so that its effect, its summary
// and its run ask a service once between them (drive_move reads the
// destination's sharing for the first two; gmail_reply reads the message
// it answers for the last two). It lives as long as the call.
type memo struct {
	mu      sync.Mutex
	entries map[string]*memoEntry
}

type memoEntry struct {
	once sync.Once
	v    any
	err  error
}

type memoKey struct{}

// withMemo gives a call its memo.
func withMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &memo{entries: map[string]*memoEntry{}})
}

// Once returns what f returns, calling it once per key in the call ctx
// belongs to (the executor gives each call its own); outside a call it
// just calls f. Callers name keys after their package and arguments
// ("drive.shared "+folder). An error is kept like a value: the call
// sees one answer throughout.
func Once[T any](ctx context.Context, key string, f func() (T, error)) (T, error) {
	m, ok := ctx.Value(memoKey{}).(*memo)
	if !ok {
		return f()
	}
	m.mu.Lock()
	e, ok := m.entries[key]
	if !ok {
		e = &memoEntry{}
		m.entries[key] = e
	}
	m.mu.Unlock()
	e.once.Do(func() { e.v, e.err = f() })
	v, _ := e.v.(T)
	return v, e.err
}
