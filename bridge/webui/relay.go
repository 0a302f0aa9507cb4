package webui

import (
	"context"
	"encoding/json"

	"loadout/bridge"
)

// What one process shows in a chat reaches the pages open on the
// others: each event is told to them by a notice of the store
// (bridge.TopicWebChat), and each process hands what it hears to its
// own streams. A kept event is in the store already: a notice too large
// for it carries only its id, and a stream that misses one (a notice
// lost, two processes' events heard out of order) reads the history
// again, as it does when the notices were interrupted.

// notice is what a process tells the others: an event of a chat, or,
// for a kept event too large for a notice, its id.
type notice struct {
	From  string `json:"from"`
	Chat  string `json:"chat"`
	Event *event `json:"e,omitempty"`
	ID    int64  `json:"id,omitempty"`
}

// tell tells the other processes of e, shown in chatKey. A draft too
// large for a notice is told by its end, which a page shows while the
// answer is written; a kept event too large, by its id.
func (rs *rooms) tell(ctx context.Context, chatKey string, e event) {
	if rs.signals == nil {
		return
	}
	n := notice{From: rs.mark, Chat: chatKey, Event: &e}
	b, err := json.Marshal(n)
	if err != nil {
		return
	}
	if len(b) > bridge.MaxSignal && e.ID != 0 {
		n.Event, n.ID = nil, e.ID
		if b, err = json.Marshal(n); err != nil {
			return
		}
	}
	for keep, cut := len(e.Text), e; len(b) > bridge.MaxSignal && keep > 0; {
		// Escapes make the text longer in JSON than it is: cut again
		// until it fits.
		keep -= len(b) - bridge.MaxSignal + 64
		cut.Text = "…" + tail(e.Text, keep)
		n.Event = &cut
		if b, err = json.Marshal(n); err != nil {
			return
		}
	}
	if err := rs.signals.Signal(ctx, bridge.TopicWebChat, string(b)); err != nil && e.Kind != kindDraft {
		rs.log.Warn("webui: could not tell the other processes of an event; their pages show it when they read the chat again", "err", err)
	}
}

// tail is the last n bytes of s at most, from a rune's start.
func tail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	i := len(s) - n
	for i < len(s) && s[i]&0xC0 == 0x80 {
		i++
	}
	return s[i:]
}

// listen hands what the other processes tell to this process's streams
// until ctx ends.
func (rs *rooms) listen(ctx context.Context) {
	if rs.signals != nil {
		rs.signals.Listen(ctx, bridge.TopicWebChat, rs.heard)
	}
}

// heard takes one notice: an event for the chat's streams here, if any
// is open. An empty one says notices may have been lost: every stream
// reads its chat again.
func (rs *rooms) heard(payload string) {
	if payload == "" {
		rs.mu.Lock()
		keys := make([]string, 0, len(rs.chats))
		for key := range rs.chats {
			keys = append(keys, key)
		}
		rs.mu.Unlock()
		for _, key := range keys {
			rs.publish(key, event{Fetch: true})
		}
		return
	}
	var n notice
	if json.Unmarshal([]byte(payload), &n) != nil || n.From == rs.mark || n.Chat == "" {
		return
	}
	if n.Event == nil {
		rs.publish(n.Chat, event{ID: n.ID, Fetch: true})
		return
	}
	e := *n.Event
	e.Fetch = false
	rs.mu.Lock()
	r := rs.chats[n.Chat]
	if r == nil {
		// No stream here: one that opens reads the store.
		rs.mu.Unlock()
		return
	}
	switch {
	case e.Kind == kindWorking:
		r.working = e.On
	case e.Kind == kindDraft:
		d := e
		r.draft = &d
	case e.Replaces != "" && r.draft != nil && r.draft.Ref == e.Replaces:
		r.draft = nil
	}
	rs.mu.Unlock()
	rs.publish(n.Chat, e)
}
