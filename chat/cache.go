package chat

import "sync"

// historyCache keeps the tail of recent sessions' histories in memory so a
// message does not re-read its window from the store. An entry is valid
// only while the session's persisted message count matches the count it
// was taken at, so writes by anyone else (another process on the same
// file, a failed turn) simply cause a re-read.
type historyCache struct {
	mu      sync.Mutex
	max     int
	entries map[int64]cachedHistory
}

type cachedHistory struct {
	count  int // the session's message count this tail reflects
	msgs   []Message
	loaded []string // the groups loaded in the session at that count
}

func newHistoryCache(max int) *historyCache {
	return &historyCache{max: max, entries: map[int64]cachedHistory{}}
}

// take hands the session's cached tail and loaded groups to the caller,
// if they reflect count persisted messages, and forgets them: one chat's
// messages are handled one at a time, so the turn may append to them in
// place and put them back when done (or not, after a failure). The
// loaded groups follow from the messages, so the same count vouches for
// both.
func (c *historyCache) take(session int64, count int) ([]Message, []string, bool) {
	if c.max <= 0 {
		return nil, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[session]
	if !ok || e.count != count {
		return nil, nil, false
	}
	delete(c.entries, session)
	return e.msgs, e.loaded, true
}

// put stores the tail of msgs whose tokens fit in budget (at least the
// messages the budget could ever select), evicting an arbitrary entry
// when full. The caller must not modify msgs afterwards.
func (c *historyCache) put(session int64, count int, msgs []Message, loaded []string, budget, maxMsgs int) {
	if c.max <= 0 {
		return
	}
	start, used := len(msgs), 0
	for start > 0 && len(msgs)-start < maxMsgs {
		used += msgs[start-1].Tokens
		if used > budget {
			break
		}
		start--
	}
	tail := msgs[start:]
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[session]; !ok && len(c.entries) >= c.max {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[session] = cachedHistory{count: count, msgs: tail, loaded: loaded}
}

// drop forgets a session.
func (c *historyCache) drop(session int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, session)
}
