package discord

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// gateway keeps a connection to Discord's gateway until ctx ends: it
// connects (identifying, or resuming the session a dropped connection
// left), waits for the connection to drop, and connects again, with
// backoff while the gateway cannot be reached. Each new session (READY)
// is followed by reading back what was missed.
func (a *Adapter) gateway(ctx context.Context) error {
	// Another process may have held the gateway since this one read the
	// cursors: what it stored, and the conversations it met, are read
	// back from the store's cursors.
	a.cursors.reload()
	a.log.Info("discord: this process holds the gateway")
	a.api.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second}
	a.mu.Lock()
	// The gateway may come back to this process after it lost it: events
	// are taken again, and a drop signalled by the last close is old.
	a.runCtx, a.closing = ctx, false
	a.mu.Unlock()
	select {
	case <-a.down:
	default:
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.catchUps(ctx) })
	defer wg.Wait()
	b := a.policy().New()
	for {
		err := a.api.Open()
		switch {
		case err == nil, errors.Is(err, discordgo.ErrWSAlreadyOpen):
			b.Reset()
			select {
			case <-ctx.Done():
				a.close()
				return nil
			case <-a.down:
				a.log.Info("discord: the gateway connection dropped; reconnecting")
			}
			continue
		case ctx.Err() != nil:
			return nil
		}
		wait := b.Next()
		a.log.Warn("discord: cannot reach the gateway; retrying", "err", err, "wait", wait)
		if b.Wait(ctx, wait) != nil {
			a.close()
			return nil
		}
	}
}

// close ends the gateway connection and waits for the work its events
// started.
func (a *Adapter) close() {
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	if err := a.api.Close(); err != nil {
		a.log.Debug("discord: closing the gateway", "err", err)
	}
	a.events.Wait()
}

// context is the context events are handled under: Run's, while it
// runs.
func (a *Adapter) context() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runCtx == nil {
		return context.Background()
	}
	return a.runCtx
}

// onReady starts a new session: it learns the application's id and
// asks for what was missed to be read back. Until that is done, the
// session's messages wait (see gated), so that none is stored, and
// moves its conversation's cursor, before an earlier one missed.
func (a *Adapter) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	a.mu.Lock()
	if r.User != nil {
		a.self, a.name = r.User.ID, r.User.Username
	}
	if r.Application != nil && r.Application.ID != "" {
		a.appID = r.Application.ID
	}
	if a.gate == nil {
		a.gate = make(chan struct{})
	}
	a.mu.Unlock()
	a.log.Info("discord gateway session started", "session", r.SessionID)
	a.wantCatchUp()
}

// gated waits until what the session missed is read back; false when
// ctx ends first.
func (a *Adapter) gated(ctx context.Context) bool {
	a.mu.Lock()
	gate := a.gate
	a.mu.Unlock()
	if gate == nil {
		return true
	}
	select {
	case <-gate:
		return true
	case <-ctx.Done():
		return false
	}
}

// onResumed: Discord replays what the dropped connection missed.
func (a *Adapter) onResumed(*discordgo.Session, *discordgo.Resumed) {
	a.log.Info("discord gateway session resumed")
}

func (a *Adapter) onDisconnect(*discordgo.Session, *discordgo.Disconnect) {
	select {
	case a.down <- struct{}{}:
	default:
	}
}

func (a *Adapter) wantCatchUp() {
	select {
	case a.sessions <- struct{}{}:
	default:
	}
}

// catchUps registers the slash commands after the first session, and
// reads back what was missed after each. What could not be stored is
// tried again with backoff.
func (a *Adapter) catchUps(ctx context.Context) {
	registered := false
	b := a.policy().New()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.sessions:
		}
		ok := a.catchUp(ctx)
		a.mu.Lock()
		if a.gate != nil {
			close(a.gate)
			a.gate = nil
		}
		a.mu.Unlock()
		if !registered {
			registered = a.register(ctx) == nil
		}
		if ok {
			b.Reset()
			continue
		}
		if b.Wait(ctx, b.Next()) != nil {
			return
		}
		a.wantCatchUp()
	}
}

// maxPages bounds how many pages of 100 messages one conversation's
// catching up reads.
const maxPages = 50

// catchUp reads each known conversation's messages after the last one
// stored, and each allowed person's direct messages, through the inbox.
// It reports whether everything was stored.
func (a *Adapter) catchUp(ctx context.Context) bool {
	if err := a.cursors.load(ctx); err != nil {
		a.log.Error("discord: cannot read the conversations' cursors", "err", err)
		return false
	}
	ok := true
	for _, user := range a.cfg.AllowedUsers {
		if _, err := strconv.ParseUint(user, 10, 64); err != nil {
			continue // a @username has no direct message channel to read
		}
		ch, err := a.api.UserChannelCreate(user, discordgo.WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("discord: cannot open a direct message channel to read back", "user_id", user, "err", err)
			}
			continue
		}
		a.cursors.know(ch.ID)
	}
	for _, ch := range a.cursors.channels() {
		if ctx.Err() != nil {
			return false
		}
		ok = a.readBack(ctx, ch) && ok
	}
	return ok
}

// readBack reads one conversation's messages after its cursor, oldest
// first, through the inbox, while holding the conversation, so that a
// message from the gateway is stored in its order and the cursor never
// passes a message not stored.
func (a *Adapter) readBack(ctx context.Context, channel string) bool {
	unlock := a.cursors.lock(channel)
	defer unlock()
	c, _ := a.cursors.get(channel)
	after := c.Last
	// What follows the cursor is read now: a gap the gateway left is
	// filled, or found again.
	a.cursors.healed(channel)
	for range maxPages {
		ms, err := a.api.ChannelMessages(channel, 100, "", after, "", discordgo.WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("discord: cannot read back a conversation's messages", "channel_id", channel, "err", err)
			}
			return !retryable(err)
		}
		slices.SortFunc(ms, func(x, y *discordgo.Message) int { return compareIDs(x.ID, y.ID) })
		taken := 0
		for _, m := range ms {
			m.GuildID = c.Guild
			fresh, ok := a.takeHeld(ctx, m)
			if !ok {
				return false
			}
			if fresh {
				taken++
			}
			after = m.ID
		}
		if taken > 0 {
			a.log.Info("discord: read back messages sent while disconnected", "channel_id", channel, "count", taken)
		}
		if len(ms) < 100 {
			return true
		}
	}
	return true
}

// retryable reports an error worth trying again: not Discord refusing
// the request (a channel gone, access lost).
func retryable(err error) bool {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode >= 500 || re.Response.StatusCode == http.StatusTooManyRequests
	}
	return true
}

// compareIDs orders snowflakes, decimal numbers of up to 20 digits.
func compareIDs(x, y string) int {
	if len(x) != len(y) {
		return len(x) - len(y)
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
