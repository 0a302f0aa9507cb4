package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"

	"loadout/bridge"
)

// e2ee is end-to-end encryption as the channel uses it. e2ee_goolm.go
// builds it on mautrix's crypto with goolm, its pure-Go Olm; a build
// without the goolm tag has none (e2ee_none.go), and tells people in
// encrypted rooms it cannot read them. Sending encrypts by itself once
// the client has the crypto helper.
//
// The bot device's state lives in the database, and processes sharing
// it take turns with it (cryptoLock): Sync and the encryption of what is
// sent hold the lock; what only the process that syncs does (Decrypt)
// needs no more.
type e2ee interface {
	// Sync hands one sync to the encryption machinery and to the room
	// states: to-device messages (room keys), device lists, one-time key
	// counts, members. An error means the lock was not had (ctx ended):
	// the sync must not be confirmed.
	Sync(ctx context.Context, res *mautrix.RespSync, since string) error
	// Reload reads the olm account again from the database, as another
	// process may have changed it: when this process takes the sync
	// over.
	Reload(ctx context.Context) error
	// Decrypt returns the plaintext event of evt, an m.room.encrypted
	// event; an error wrapping errNoKeys when its keys have not arrived.
	Decrypt(ctx context.Context, evt *event.Event) (*event.Event, error)
	// RequestKeys asks the sender's devices (and the bot's own) for
	// evt's keys.
	RequestKeys(ctx context.Context, evt *event.Event)
}

// errNoKeys: an encrypted event's session keys have not reached the
// bot's device (yet).
var errNoKeys = errors.New("matrix: the message's keys have not arrived")

// keptEvent is an encrypted event waiting for its keys, as the store
// keeps it.
type keptEvent struct {
	Event json.RawMessage `json:"event"`
	// Since is when it was first seen; after KeyWait its sender is told.
	Since time.Time `json:"since"`
}

// keptEvents are the encrypted events waiting for their keys, kept in
// the store (stateKept) before the sync that brought them is confirmed.
type keptEvents struct {
	mu   sync.Mutex
	list []keptEvent
	ids  map[string]bool
}

func (k *keptEvents) load(ctx context.Context, st bridge.Store) error {
	raw, err := st.State(ctx, stateKept)
	if err != nil {
		return fmt.Errorf("matrix: read the messages waiting for keys: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.list, k.ids = nil, map[string]bool{}
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &k.list); err != nil {
			return fmt.Errorf("matrix: unreadable messages waiting for keys: %w", err)
		}
	}
	for _, e := range k.list {
		k.ids[eventID(e.Event)] = true
	}
	return nil
}

func eventID(raw json.RawMessage) string {
	var v struct {
		ID string `json:"event_id"`
	}
	json.Unmarshal(raw, &v)
	return v.ID
}

// add keeps evt; an event kept already is not kept twice.
func (k *keptEvents) add(ctx context.Context, st bridge.Store, evt *event.Event) error {
	raw, err := json.Marshal(evt)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ids[string(evt.ID)] {
		return nil
	}
	list := append(slices.Clone(k.list), keptEvent{Event: raw, Since: time.Now().UTC()})
	if err := k.save(ctx, st, list); err != nil {
		return err
	}
	k.ids[string(evt.ID)] = true
	return nil
}

// save stores list as the kept events; k.mu is held.
func (k *keptEvents) save(ctx context.Context, st bridge.Store, list []keptEvent) error {
	b, _ := json.Marshal(list)
	if err := st.SetState(ctx, stateKept, string(b)); err != nil {
		return fmt.Errorf("matrix: keep a message waiting for keys: %w", err)
	}
	k.list = list
	return nil
}

// retryKept tries the kept events again, after a sync that may have
// brought their keys: one decrypted now is taken as if it had just
// arrived; one past KeyWait is answered once and forgotten. An error
// means the store failed; what was not handled stays kept.
func (a *Adapter) retryKept(ctx context.Context) error {
	k := a.kept
	k.mu.Lock()
	list := slices.Clone(k.list)
	k.mu.Unlock()
	if len(list) == 0 || a.e2e == nil {
		return nil
	}
	var left []keptEvent
	changed := false
	for i, ke := range list {
		var evt event.Event
		if err := json.Unmarshal(ke.Event, &evt); err != nil {
			changed = true
			continue
		}
		evt.Content.ParseRaw(evt.Type)
		dec, err := a.e2e.Decrypt(ctx, &evt)
		switch {
		case err == nil:
			a.log.Info("matrix: the keys of a waiting message arrived", "room", evt.RoomID, "event", evt.ID)
			err = a.takePlain(ctx, dec)
		case errors.Is(err, errNoKeys) && time.Since(ke.Since) < a.cfg.KeyWait:
			left = append(left, ke)
			continue
		default:
			a.log.Warn("matrix: an encrypted message's keys never arrived; its sender is told", "room", evt.RoomID, "event", evt.ID, "err", err)
			err = a.tell(ctx, &evt, "undecryptable:"+string(evt.ID), TextUndecryptable)
		}
		if err != nil {
			left = append(left, list[i:]...)
			a.keepOnly(ctx, left)
			return err
		}
		changed = true
	}
	if changed {
		return a.keepOnly(ctx, left)
	}
	return nil
}

// keepOnly stores left as the kept events. Events are kept and
// retried by the sync loop alone, so nothing is added meanwhile.
func (a *Adapter) keepOnly(ctx context.Context, left []keptEvent) error {
	k := a.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.save(ctx, a.store, left); err != nil {
		return err
	}
	k.ids = map[string]bool{}
	for _, e := range left {
		k.ids[eventID(e.Event)] = true
	}
	return nil
}
