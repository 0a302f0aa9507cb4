package bridge

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Allowlist decides who may use the bot. The zero value allows nobody.
type Allowlist struct {
	ids     map[string]bool
	names   map[string]bool
	mu      sync.Mutex
	refused map[string]bool
	// With Keep: where Let keeps the usernames people were let in by,
	// under keys of channel; kept is what this process kept.
	states  States
	channel string
	kept    map[string]string
}

// States are a store's small named states (a channel's Store has them).
type States interface {
	State(ctx context.Context, key string) (string, error)
	SetState(ctx context.Context, key, value string) error
}

// NewAllowlist builds an allowlist from entries that are ids ("42",
// "U024BE7LH") or usernames ("@ana"; compared without case).
func NewAllowlist(entries []string) *Allowlist {
	a := &Allowlist{ids: map[string]bool{}, names: map[string]bool{}, refused: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if strings.HasPrefix(e, "@") {
			a.names[strings.ToLower(strings.TrimPrefix(e, "@"))] = true
		} else if e != "" {
			a.ids[e] = true
		}
	}
	return a
}

// Keep has the list keep in st, for channel ("telegram"), the username
// each person Let lets in was let in by, so that Admits can judge them
// later by their id alone. It returns a; call it before the list is
// used.
func (a *Allowlist) Keep(st States, channel string) *Allowlist {
	a.states, a.channel, a.kept = st, channel, map[string]string{}
	return a
}

// Allowed reports whether the user with this id or username may talk to
// the bot. username may be empty or carry a leading "@".
func (a *Allowlist) Allowed(id, username string) bool {
	if a == nil {
		return false
	}
	if id != "" && a.ids[id] {
		return true
	}
	username = normal(username)
	return username != "" && a.names[username]
}

func normal(username string) string { return strings.ToLower(strings.TrimPrefix(username, "@")) }

// Let is Allowed for a message the person sends now. When the list
// names their username, it also keeps it (Keep), so Admits knows them by
// their id: a store is written only when the username changes. An error
// is a failure to keep it; the answer holds all the same.
func (a *Allowlist) Let(ctx context.Context, id, username string) (bool, error) {
	ok := a.Allowed(id, username)
	name := normal(username)
	if a == nil || a.states == nil || id == "" || name == "" || !a.names[name] {
		return ok, nil
	}
	a.mu.Lock()
	same := a.kept[id] == name
	a.mu.Unlock()
	if same {
		return ok, nil
	}
	if err := a.states.SetState(ctx, a.key(id), name); err != nil {
		return ok, fmt.Errorf("bridge: keep the username %s was let in by: %w", id, err)
	}
	a.mu.Lock()
	a.kept[id] = name
	a.mu.Unlock()
	return ok, nil
}

// Admits reports whether the list lets in, now, the person with this
// id, known by their id alone (a web session of theirs): listed by id,
// or by the username they were last let in by (Let, with Keep). A
// person let in only by a username the list never kept is not let in.
// An error is a store failure: it cannot tell.
func (a *Allowlist) Admits(ctx context.Context, id string) (bool, error) {
	if a == nil || id == "" {
		return false, nil
	}
	if a.ids[id] {
		return true, nil
	}
	if len(a.names) == 0 || a.states == nil {
		return false, nil
	}
	// Read from the store each time: another replica may have kept a
	// newer one.
	name, err := a.states.State(ctx, a.key(id))
	if err != nil {
		return false, fmt.Errorf("bridge: read the username %s was let in by: %w", id, err)
	}
	return name != "" && a.names[name], nil
}

// key is where the username id was let in by is kept.
func (a *Allowlist) key(id string) string { return a.channel + ":allowed-name:" + id }

// FirstRefusal records that id was refused and reports whether this is the
// first time since start, so the refusal is sent only once.
func (a *Allowlist) FirstRefusal(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil {
		a.refused = map[string]bool{}
	}
	if a.refused[id] {
		return false
	}
	a.refused[id] = true
	return true
}

// Len returns the number of entries.
func (a *Allowlist) Len() int {
	if a == nil {
		return 0
	}
	return len(a.ids) + len(a.names)
}
