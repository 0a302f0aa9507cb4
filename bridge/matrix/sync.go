package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix"

	"loadout/backoff"
	"loadout/bridge"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// syncer is what the encryption machinery hooks into (to-device
// messages, device lists, members): mautrix's DefaultSyncer, without its
// Dispatch, so nothing decrypts or answers events behind the channel's
// back. The channel reads each sync's rooms itself, after the syncer.
type syncer struct{ d *mautrix.DefaultSyncer }

var _ mautrix.ExtensibleSyncer = syncer{}

func newSyncer() syncer {
	d := mautrix.NewDefaultSyncer()
	d.ParseErrorHandler = func(*event.Event, error) bool { return true }
	return syncer{d}
}

func (s syncer) ProcessResponse(ctx context.Context, res *mautrix.RespSync, since string) error {
	return s.d.ProcessResponse(ctx, res, since)
}
func (s syncer) OnFailedSync(res *mautrix.RespSync, err error) (time.Duration, error) {
	return s.d.OnFailedSync(res, err)
}
func (s syncer) GetFilterJSON(userID id.UserID) *mautrix.Filter    { return s.d.GetFilterJSON(userID) }
func (s syncer) OnSync(cb mautrix.SyncHandler)                     { s.d.OnSync(cb) }
func (s syncer) OnEvent(cb mautrix.EventHandler)                   { s.d.OnEvent(cb) }
func (s syncer) OnEventType(t event.Type, cb mautrix.EventHandler) { s.d.OnEventType(t, cb) }

// syncLoop syncs until ctx ends, from the stored sync token: it runs
// while this process holds the sync, which another may have held
// before. The next_batch token of a sync is stored only once every event
// of it is in the inbox (or kept to be decrypted later): a crash
// re-reads the last sync, whose events the inbox recognises. A failed
// sync is tried again with growing waits; a refused token ends the loop
// with an error.
func (a *Adapter) syncLoop(ctx context.Context) error {
	b := a.patient().New()
	for {
		err := a.takeOver(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		a.log.Warn("matrix: could not read the state the last sync left; retrying", "err", err)
		if b.Wait(ctx, b.Next()) != nil {
			return nil
		}
	}
	b.Reset()
	since, err := a.store.State(ctx, stateNextBatch)
	if err != nil {
		return fmt.Errorf("matrix: read the sync token: %w", err)
	}
	started, settled := false, false
	for ctx.Err() == nil {
		timeout := int(a.cfg.SyncTimeout / time.Millisecond)
		if !started {
			timeout = 0 // the first sync catches up and comes back at once
		}
		res, err := a.cli.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: timeout, FilterID: syncFilter})
		if err == nil {
			err = a.handleSync(ctx, res, since)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if retry, _ := final(err); !retry {
				return fmt.Errorf("matrix: the homeserver refused the bot's token (matrix.access_token): %w", err)
			}
			a.cfg.Observer.Retried("matrix")
			wait := b.Next()
			a.log.Warn("matrix: sync failed; retrying", "err", err, "wait", wait)
			if b.Wait(ctx, wait) != nil {
				return nil
			}
			continue
		}
		b.Reset()
		if err := a.store.SetState(ctx, stateNextBatch, res.NextBatch); err != nil {
			// The events are stored; the next sync from the old token
			// brings them again, and the inbox drops them.
			a.log.Warn("matrix: could not store the sync token", "err", err)
		}
		since = res.NextBatch
		if !started {
			// The pipeline resumes what the last process left only once
			// the homeserver has shown which of its parts it took: an
			// event it took from a process that died before the answer
			// reaches /sync a moment later, so when there is something
			// to resume, one more sync follows after resumeSettle.
			if !settled {
				settled = true
				if left, err := a.store.Unfinished(ctx, "matrix"); err == nil && len(left) > 0 {
					if backoff.Sleep(ctx, resumeSettle) != nil {
						return nil
					}
					continue
				}
			}
			if err := a.startPipeline(ctx); err != nil {
				return nil // ctx done
			}
			started = true
		}
		a.mu.Lock()
		a.ready = true
		a.mu.Unlock()
	}
	return nil
}

// takeOver reads again what the process that synced last (this one or
// another) changed since this one read it: the olm account, which
// changes with each one-time key made or used, and the messages waiting
// for their keys.
func (a *Adapter) takeOver(ctx context.Context) error {
	if err := a.kept.load(ctx, a.store); err != nil {
		return err
	}
	if a.e2e != nil {
		if err := a.e2e.Reload(ctx); err != nil {
			return fmt.Errorf("matrix: end-to-end encryption: %w", err)
		}
	}
	return nil
}

// handleSync hands one sync to the encryption machinery, then takes its
// invites and its rooms' events. An error means some event may not be
// stored: the sync is not confirmed. The first sync of an account (since
// empty) answers no message: it is what was said before the bot came.
func (a *Adapter) handleSync(ctx context.Context, res *mautrix.RespSync, since string) error {
	if a.e2e != nil {
		if err := a.e2e.Sync(ctx, res, since); err != nil {
			return err
		}
	} else if err := a.cli.Syncer.ProcessResponse(ctx, res, since); err != nil {
		// A panic in the machinery, already recovered: the events are
		// still read, and what failed is logged.
		a.log.Error("matrix: processing a sync failed", "err", err)
	}
	for room, inv := range res.Rooms.Invite {
		if err := a.invited(ctx, room, inv); err != nil {
			return err
		}
	}
	if err := a.retryKept(ctx); err != nil {
		return err
	}
	for room, joined := range res.Rooms.Join {
		events := joined.Timeline.Events
		if joined.Timeline.Limited && since != "" {
			gap, err := a.gap(ctx, room, joined.Timeline.PrevBatch, since)
			if err != nil {
				return err
			}
			events = append(gap, events...)
		}
		var sent []string
		for _, evt := range events {
			evt.RoomID = room
			if evt.Sender == a.self() && strings.HasPrefix(evt.Unsigned.TransactionID, txnPrefix) {
				sent = append(sent, evt.Unsigned.TransactionID)
			}
			if since == "" {
				continue
			}
			if err := a.take(ctx, evt); err != nil {
				return err
			}
		}
		if err := a.sentParts(ctx, room, sent); err != nil {
			return err
		}
	}
	return nil
}

// resumeSettle is how long a restarted process waits for the
// homeserver to show the parts it took from the last one.
const resumeSettle = time.Second

// syncFilter asks each sync for up to 50 events of a room (a longer
// stretch comes as a gap, which gap fills) and no presence.
const syncFilter = `{"room":{"timeline":{"limit":50}},"presence":{"not_types":["*"]}}`

// maxGap bounds the events read to fill one room's gap.
const maxGap = 1000

// gap reads the events of room between the last sync (since) and this
// one's timeline (prev), which the sync left out: the bot was away
// long, or the room busy. Nothing said while it was away is lost.
func (a *Adapter) gap(ctx context.Context, room id.RoomID, prev, since string) ([]*event.Event, error) {
	var back []*event.Event
	from := prev
	for from != "" && len(back) < maxGap {
		res, err := a.cli.Messages(ctx, room, from, since, mautrix.DirectionBackward, nil, 100)
		if err != nil {
			return nil, fmt.Errorf("matrix: read the gap in %s: %w", room, err)
		}
		if len(res.Chunk) == 0 || res.End == from {
			break
		}
		back = append(back, res.Chunk...)
		from = res.End
	}
	if len(back) >= maxGap {
		a.log.Warn("matrix: a long gap in a room; only its last events are read", "room", room, "events", len(back))
	}
	slices.Reverse(back)
	for _, evt := range back {
		evt.RoomID = room
		evt.Content.ParseRaw(evt.Type)
	}
	return back, nil
}

// sentTxns is how many of the bot's last parts in a room are
// remembered as taken by the homeserver.
const sentTxns = 64

// sentParts remembers the transactions of the bot's own parts the sync
// showed in room (the homeserver names the transaction to the device
// that sent it), the last sentTxns of them.
func (a *Adapter) sentParts(ctx context.Context, room id.RoomID, txns []string) error {
	if len(txns) == 0 {
		return nil
	}
	known, err := a.sentTxnList(ctx, room)
	if err != nil {
		return err
	}
	for _, t := range txns {
		if !slices.Contains(known, t) {
			known = append(known, t)
		}
	}
	if len(known) > sentTxns {
		known = known[len(known)-sentTxns:]
	}
	b, _ := json.Marshal(known)
	return a.store.SetState(ctx, stateSentPrefix+string(room), string(b))
}

func (a *Adapter) sentTxnList(ctx context.Context, room id.RoomID) ([]string, error) {
	raw, err := a.store.State(ctx, stateSentPrefix+string(room))
	if err != nil || raw == "" {
		return nil, err
	}
	var known []string
	json.Unmarshal([]byte(raw), &known)
	return known, nil
}

// invited joins a room an allowed person invited the bot to, and rejects
// anyone else's invite.
func (a *Adapter) invited(ctx context.Context, room id.RoomID, inv *mautrix.SyncInvitedRoom) error {
	var inviter id.UserID
	for _, evt := range inv.State.Events {
		if evt.Type == event.StateMember && evt.StateKey != nil && id.UserID(*evt.StateKey) == a.self() {
			inviter = evt.Sender
		}
	}
	if inviter == "" || !a.allowed(inviter) {
		a.log.Warn("matrix: rejected an invite from someone not in matrix.allowed_users", "user_id", inviter, "room", room)
		_, err := a.cli.LeaveRoom(ctx, room)
		if err != nil && !refused(err) {
			return fmt.Errorf("matrix: reject the invite to %s: %w", room, err)
		}
		return nil
	}
	_, err := a.cli.JoinRoomByID(ctx, room)
	if err != nil && !refused(err) {
		return fmt.Errorf("matrix: join %s: %w", room, err)
	}
	if err == nil {
		a.log.Info("matrix: joined a room", "room", room, "invited_by", inviter)
	}
	return nil
}

// refused reports an error the homeserver will answer the same way
// every time (the invite was withdrawn, the room is gone).
func refused(err error) bool {
	var he mautrix.HTTPError
	return errors.As(err, &he) && he.Response != nil && he.Response.StatusCode >= 400 && he.Response.StatusCode < 500 && he.Response.StatusCode != 429
}

// allowed reports whether user may talk to the bot.
func (a *Adapter) allowed(user id.UserID) bool {
	return a.allow.Allowed("", string(user))
}

// Admits reports whether matrix.allowed_users lets in the person with
// this key ("matrix:@ana:example.org") now (bridge.Admitter).
func (a *Adapter) Admits(_ context.Context, userKey string) (bool, error) {
	user, ok := strings.CutPrefix(userKey, "matrix:")
	return ok && user != "" && a.allowed(id.UserID(user)), nil
}

var _ bridge.Admitter = (*Adapter)(nil)
