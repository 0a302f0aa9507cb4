package matrix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"maunium.net/go/mautrix"
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

// syncLoop syncs until ctx ends. The next_batch token of a sync is
// stored only once every event of it is in the inbox (or kept to be
// decrypted later): a crash re-reads the last sync, whose events the
// inbox recognises. A failed sync is tried again with growing waits; a
// refused token ends the loop with an error.
func (a *Adapter) syncLoop(ctx context.Context) error {
	since, err := a.store.State(ctx, stateNextBatch)
	if err != nil {
		return fmt.Errorf("matrix: read the sync token: %w", err)
	}
	b := a.patient().New()
	for ctx.Err() == nil {
		res, err := a.cli.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: int(a.cfg.SyncTimeout / time.Millisecond)})
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
		a.mu.Lock()
		a.ready = true
		a.mu.Unlock()
	}
	return nil
}

// handleSync hands one sync to the encryption machinery, then takes its
// invites and its rooms' events. An error means some event may not be
// stored: the sync is not confirmed. The first sync of an account (since
// empty) answers no message: it is what was said before the bot came.
func (a *Adapter) handleSync(ctx context.Context, res *mautrix.RespSync, since string) error {
	if err := a.cli.Syncer.ProcessResponse(ctx, res, since); err != nil {
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
	if since == "" {
		return nil
	}
	for room, joined := range res.Rooms.Join {
		for _, evt := range joined.Timeline.Events {
			evt.RoomID = room
			if err := a.take(ctx, evt); err != nil {
				return err
			}
		}
	}
	return nil
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
