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
	return context.WithValue(ctx, memoKey{}, newMemo())
}

func newMemo() *memo { return &memo{entries: map[string]*memoEntry{}} }

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
	e := m.entry(key)
	e.once.Do(func() { e.v, e.err = f() })
	v, _ := e.v.(T)
	return v, e.err
}

// entry is key's entry, made on first use.
func (m *memo) entry(key string) *memoEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		e = &memoEntry{}
		m.entries[key] = e
	}
	return e
}

type turnKey struct{}

// WithTurn gives a turn its memo: what PerTurn keeps lives as long as the
// turn. The engine gives each turn one.
func WithTurn(ctx context.Context) context.Context {
	return context.WithValue(ctx, turnKey{}, newMemo())
}

// PerTurn returns what f returns, calling it once per key in the turn
// ctx belongs to, for every call of the turn (a person's Google client:
// their token decrypted once, the service built once). Outside a turn it
// just calls f. An error is not kept: the next call tries again. Keys
// name their package and what they depend on ("google.account "+user).
func PerTurn[T any](ctx context.Context, key string, f func() (T, error)) (T, error) {
	m, ok := ctx.Value(turnKey{}).(*memo)
	if !ok {
		return f()
	}
	e := m.entry(key)
	e.once.Do(func() { e.v, e.err = f() })
	if e.err != nil {
		// Forgotten, so the next call tries again; this one reports it.
		m.mu.Lock()
		if m.entries[key] == e {
			delete(m.entries, key)
		}
		m.mu.Unlock()
		var zero T
		return zero, e.err
	}
	v, _ := e.v.(T)
	return v, nil
}
