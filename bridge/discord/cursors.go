package discord

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"loadout/bridge"
)

// Store is what the channel keeps: its inbox and small states, and each
// conversation's cursor. Every process sharing the database reads the
// same cursors, so the one that takes the gateway over reads back from
// where the last holder stopped. store.DB is one.
type Store interface {
	bridge.Store
	// Cursors returns the cursors of scope by name.
	Cursors(ctx context.Context, scope string) (map[string]int64, error)
	// AdvanceCursor moves scope's cursor name to pos, creating it, and
	// never back; it reports whether the cursor moved.
	AdvanceCursor(ctx context.Context, scope, name string, pos int64) (bool, error)
}

// cursorScope is the scope of the channel's cursors in the store: one
// per conversation, named "<guild>/<channel>" ("@me" for a direct
// message), at the conversation's last message the inbox holds.
const cursorScope = "discord"

// legacyCursorsKey is the state in which an earlier version kept every
// conversation's cursor, as one JSON object; it is moved to the store's
// cursors when first read.
const legacyCursorsKey = "discord:cursors"

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

// cursorName is a conversation's cursor's name in the store.
func cursorName(guild, channel string) string { return cmp.Or(guild, dm) + "/" + channel }

// cursors are the conversations the bot reads back after a new
// session, each with the last message the inbox holds, as read from the
// store when this process took the gateway. A conversation whose
// message could not be stored has a gap: its cursor stays until reading
// back fills it.
type cursors struct {
	st Store

	now func() time.Time

	mu     sync.Mutex
	loaded bool
	since  string
	m      map[string]cursor
	gaps   map[string]bool
	locks  map[string]*sync.Mutex
}

func newCursors(st Store) *cursors {
	return &cursors{st: st, now: time.Now, m: map[string]cursor{}, gaps: map[string]bool{}, locks: map[string]*sync.Mutex{}}
}

// reload makes the next load read the store again: the gateway moved to
// this process, and the process that held it before may have read
// further, and met conversations this one never saw.
func (c *cursors) reload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loaded = false
	clear(c.gaps)
}

// load reads the cursors from the store, unless they were read since
// the last reload.
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
	if err := c.moveLegacy(ctx); err != nil {
		return err
	}
	stored, err := c.st.Cursors(ctx, cursorScope)
	if err != nil {
		return err
	}
	m := make(map[string]cursor, len(stored))
	for name, pos := range stored {
		guild, channel, ok := strings.Cut(name, "/")
		if !ok || channel == "" {
			continue
		}
		if guild == dm {
			guild = ""
		}
		last := strconv.FormatInt(pos, 10)
		if had, ok := m[channel]; ok && compareIDs(had.Last, last) > 0 {
			continue
		}
		m[channel] = cursor{Guild: guild, Last: last}
	}
	c.since, c.m, c.loaded = since, m, true
	return nil
}

// moveLegacy moves the cursors an earlier version kept in one state to
// the store's cursors. Moving twice (two processes at once) is
// harmless: a cursor never moves back.
func (c *cursors) moveLegacy(ctx context.Context) error {
	v, err := c.st.State(ctx, legacyCursorsKey)
	if err != nil || v == "" {
		return err
	}
	var old map[string]cursor
	if json.Unmarshal([]byte(v), &old) == nil {
		for channel, cur := range old {
			pos, err := strconv.ParseInt(cur.Last, 10, 64)
			if err != nil {
				continue
			}
			if _, err := c.st.AdvanceCursor(ctx, cursorScope, cursorName(cur.Guild, channel), pos); err != nil {
				return err
			}
		}
	}
	return c.st.SetState(ctx, legacyCursorsKey, "")
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
// back, never past a gap), in the store and here. The store's cursor
// never moves back either, so a process that lost the gateway and writes
// late cannot undo what the next holder read.
func (c *cursors) advance(ctx context.Context, channel, guild, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[channel]
	if c.gaps[channel] || ok && compareIDs(id, cur.Last) <= 0 {
		return nil
	}
	pos, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return fmt.Errorf("discord: message id %q is not a snowflake", id)
	}
	if guild == "" {
		guild = cur.Guild
	}
	if _, err := c.st.AdvanceCursor(ctx, cursorScope, cursorName(guild, channel), pos); err != nil {
		return err
	}
	c.m[channel] = cursor{Guild: guild, Last: id}
	return nil
}
