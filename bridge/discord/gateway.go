package discord

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"loadout/bridge"
)

// gateway keeps a connection to Discord's gateway until ctx ends: it
// connects (identifying, or resuming the session a dropped connection
// left), waits for the connection to drop, and connects again, with
// backoff while the gateway cannot be reached. Each new session (READY)
// is followed by reading back what was missed.
func (a *Adapter) gateway(ctx context.Context) error {
	a.api.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second}
	a.mu.Lock()
	a.runCtx = ctx
	a.mu.Unlock()
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

// cursorsKey is the state holding each conversation's cursor.
const cursorsKey = "discord:cursors"

// sinceKey is the state holding when the channel first ran, as a
// snowflake: a conversation first read back is read from then, so what
// was written before is not answered, and what was written since is.
const sinceKey = "discord:since"

// discordEpoch is the start of Discord's snowflakes, in Unix ms.
const discordEpoch = 1420070400000

// snowflake is the smallest id of a message written at t.
func snowflake(t time.Time) string {
	return strconv.FormatUint(uint64(t.UnixMilli()-discordEpoch)<<22, 10)
}

// cursor is where reading a conversation back starts: after its last
// message stored.
type cursor struct {
	Guild string `json:"guild,omitempty"`
	Last  string `json:"last"`
}

// cursors are the conversations the bot reads back after a new
// session, each with the last message the inbox holds. A conversation
// whose message could not be stored has a gap: its cursor stays until
// reading back fills it.
type cursors struct {
	st bridge.Store

	now func() time.Time

	mu     sync.Mutex
	loaded bool
	since  string
	m      map[string]cursor
	gaps   map[string]bool
	locks  map[string]*sync.Mutex
}

func newCursors(st bridge.Store) *cursors {
	return &cursors{st: st, now: time.Now, m: map[string]cursor{}, gaps: map[string]bool{}, locks: map[string]*sync.Mutex{}}
}

func (c *cursors) load(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded {
		return nil
	}
	since, err := c.st.State(ctx, sinceKey)
	if err != nil {
		return err
	}
	if since == "" {
		since = snowflake(c.now())
		if err := c.st.SetState(ctx, sinceKey, since); err != nil {
			return err
		}
	}
	c.since = since
	v, err := c.st.State(ctx, cursorsKey)
	if err != nil {
		return err
	}
	if v != "" {
		if err := json.Unmarshal([]byte(v), &c.m); err != nil {
			c.m = map[string]cursor{} // unreadable: started afresh
		}
	}
	c.loaded = true
	return nil
}

// know adds a direct message channel to read back, from the channel's
// first run when it has no cursor yet. It is stored with the next
// cursor that moves.
func (c *cursors) know(channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[channel]; !ok {
		c.m[channel] = cursor{Last: c.since}
	}
}

// lock holds a conversation for its messages to be stored in order.
func (c *cursors) lock(channel string) (unlock func()) {
	c.mu.Lock()
	l, ok := c.locks[channel]
	if !ok {
		l = &sync.Mutex{}
		c.locks[channel] = l
	}
	c.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (c *cursors) get(channel string) (cursor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[channel]
	return v, ok
}

func (c *cursors) channels() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.m))
	for ch := range c.m {
		out = append(out, ch)
	}
	slices.Sort(out)
	return out
}

// gap records that a message of channel could not be stored.
func (c *cursors) gap(channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gaps[channel] = true
}

// healed records that reading back stored everything of channel.
func (c *cursors) healed(channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.gaps, channel)
}

// advance moves channel's cursor to id once the inbox holds it (never
// back, never past a gap) and stores the cursors.
func (c *cursors) advance(ctx context.Context, channel, guild, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[channel]
	if c.gaps[channel] || ok && compareIDs(id, cur.Last) <= 0 {
		return nil
	}
	if guild == "" {
		guild = cur.Guild
	}
	c.m[channel] = cursor{Guild: guild, Last: id}
	b, _ := json.Marshal(c.m) // strings always encode
	if err := c.st.SetState(ctx, cursorsKey, string(b)); err != nil {
		if ok {
			c.m[channel] = cur
		} else {
			delete(c.m, channel)
		}
		return err
	}
	return nil
}
