package webui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"loadout/bridge"
)

// Kinds of event a page shows.
const (
	kindYou     = "you"     // the person's own message
	kindAnswer  = "answer"  // a part of an answer (Replaces: the draft it ends)
	kindAsk     = "ask"     // a question with Approve and Deny
	kindClosed  = "closed"  // a question answered or over: its buttons go
	kindFile    = "file"    // a file to download
	kindVoice   = "voice"   // a spoken answer to play
	kindDraft   = "draft"   // the answer so far (not kept)
	kindWorking = "working" // an answer is on its way, or no longer (not kept)
	kindUnsent  = "unsent"  // a message shown was not stored after all (Ref: its event id)
)

// event is one thing a page shows. Kept events have an ID, in order per
// chat, which the stream sends as its event id; drafts and the working
// sign have none and are sent whole, so a repeat changes nothing.
type event struct {
	ID       int64    `json:"id,omitempty"`
	Kind     string   `json:"kind"`
	Text     string   `json:"text,omitempty"`
	Approval string   `json:"approval,omitempty"`
	Code     string   `json:"code,omitempty"`
	Always   string   `json:"always,omitempty"` // what "Always allow" would allow, when offered
	File     string   `json:"file,omitempty"`   // its name in the chat's files
	Name     string   `json:"name,omitempty"`   // the name it was sent as
	Files    []string `json:"files,omitempty"`  // the person's attachments, as kept
	Voice    string   `json:"voice,omitempty"`  // the person's recording, as kept
	Ref      string   `json:"ref,omitempty"`    // a draft's reference
	Replaces string   `json:"replaces,omitempty"`
	Version  int      `json:"v,omitempty"` // a draft's version: a page keeps the newest
	On       bool     `json:"on,omitempty"`
	// Fetch, never sent, tells a stream to read the chat's history (and
	// its working sign) again: events were kept that it was not given.
	Fetch bool `json:"-"`
}

// history is what the store keeps of a chat for its pages: the latest
// events, trimmed to keepEvents and keepBytes.
type history struct {
	Next   int64   `json:"next"`
	Events []event `json:"events"`
}

// What a chat's history keeps at most.
const (
	keepEvents = 200
	keepBytes  = 256 << 10
)

// subBuffer is how many events a stream may fall behind before it is
// ended (the page reconnects and resumes from the store).
const subBuffer = 256

// maxStreams caps the streams open at once for one chat (tabs).
const maxStreams = 8

// keeper is what the rooms keep in the store: each chat's history and
// working sign, as small named states.
type keeper interface {
	State(ctx context.Context, key string) (string, error)
	SetState(ctx context.Context, key, value string) error
	SwapState(ctx context.Context, key, old, value string) (bool, error)
}

// rooms holds, per chat, the open streams and the draft under way; a
// chat with neither takes no memory. What one process shows, it tells
// the others (see relay.go).
type rooms struct {
	store keeper
	// signals tells the other processes sharing the store; nil when
	// there is none (this process alone streams).
	signals bridge.Signals
	// mark is on this process's notices, which it skips when they come
	// back.
	mark string
	log  *slog.Logger

	// write serialises changes to the kept histories, and sends each
	// kept event to the streams in the order of its id.
	write sync.Mutex

	mu     sync.Mutex
	live   bool // the channel runs
	closed bool // the channel has stopped: no stream is served
	chats  map[string]*room
}

type room struct {
	subs    map[*sub]bool
	draft   *event // the answer so far, if one is under way
	working bool
}

// sub is one open stream.
type sub struct {
	ch   chan event
	done bool // ended: ch is closed
}

func newRooms(store keeper, signals bridge.Signals, log *slog.Logger) *rooms {
	return &rooms{store: store, signals: signals, mark: newID(), log: log, chats: map[string]*room{}}
}

func stateKey(chatKey string) string { return "webui:history:" + chatKey }

// workingKey names a chat's working sign in the store: "1" while an
// answer is on its way.
func workingKey(chatKey string) string { return "webui:working:" + chatKey }

// maxSwaps bounds the tries to keep an event while other processes keep
// theirs in the same chat.
const maxSwaps = 20

func (rs *rooms) open() {
	rs.mu.Lock()
	rs.live = true
	rs.mu.Unlock()
}

func (rs *rooms) isOpen() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.live
}

// close ends every stream.
func (rs *rooms) close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.live, rs.closed = false, true
	for key, r := range rs.chats {
		for s := range r.subs {
			rs.end(r, s)
		}
		delete(rs.chats, key)
	}
}

// end ends s; rs.mu must be held.
func (rs *rooms) end(r *room, s *sub) {
	if !s.done {
		s.done = true
		close(s.ch)
	}
	delete(r.subs, s)
}

// history reads a chat's kept events.
func (rs *rooms) history(ctx context.Context, chatKey string) (history, error) {
	_, h, err := rs.read(ctx, chatKey)
	return h, err
}

// read reads a chat's kept events, and the state they were read from.
func (rs *rooms) read(ctx context.Context, chatKey string) (string, history, error) {
	var h history
	raw, err := rs.store.State(ctx, stateKey(chatKey))
	if err != nil {
		return "", h, fmt.Errorf("webui: read the chat's history: %w", err)
	}
	if raw == "" {
		return "", history{Next: 1}, nil
	}
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return "", h, fmt.Errorf("webui: the chat's history is unreadable: %w", err)
	}
	return raw, h, nil
}

// append keeps e in the chat's history, then sends it to its streams. An
// error means the page will not show it (nor did any stream).
func (rs *rooms) append(ctx context.Context, chatKey string, e event) error {
	_, err := rs.add(ctx, chatKey, e)
	return err
}

// add is append that returns the event's id. The history is swapped
// for the one with e, so an event another process keeps in the chat
// meanwhile is not lost: e then follows it.
func (rs *rooms) add(ctx context.Context, chatKey string, e event) (int64, error) {
	rs.write.Lock()
	defer rs.write.Unlock()
	for try := 1; ; try++ {
		old, h, err := rs.read(ctx, chatKey)
		if err != nil {
			return 0, err
		}
		e.ID = h.Next
		h.Next++
		h.Events = append(h.Events, e)
		raw, err := json.Marshal(h)
		if err != nil {
			return 0, fmt.Errorf("webui: encode the chat's history: %w", err)
		}
		for len(h.Events) > 1 && (len(h.Events) > keepEvents || len(raw) > keepBytes) {
			drop := max(1, len(h.Events)/4)
			h.Events = h.Events[drop:]
			if raw, err = json.Marshal(h); err != nil {
				return 0, fmt.Errorf("webui: encode the chat's history: %w", err)
			}
		}
		swapped, err := rs.store.SwapState(ctx, stateKey(chatKey), old, string(raw))
		if err != nil {
			return 0, fmt.Errorf("webui: keep the chat's history: %w", err)
		}
		if swapped {
			break
		}
		if try == maxSwaps {
			return 0, fmt.Errorf("webui: keep the chat's history: changed by others %d times in a row", try)
		}
	}
	rs.publish(chatKey, e)
	rs.tell(ctx, chatKey, e)
	return e.ID, nil
}

// publish sends e to the chat's streams; a stream too far behind is
// ended (its page resumes from the history).
func (rs *rooms) publish(chatKey string, e event) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.chats[chatKey]
	if r == nil {
		return
	}
	for s := range r.subs {
		select {
		case s.ch <- e:
		default:
			rs.log.Info("webui: a stream fell behind and was ended; its page resumes", "chat", chatKey)
			rs.end(r, s)
		}
	}
	rs.forget(chatKey, r)
}

// forget drops a chat's room when nothing is in it; rs.mu must be held.
func (rs *rooms) forget(chatKey string, r *room) {
	if len(r.subs) == 0 && r.draft == nil && !r.working {
		delete(rs.chats, chatKey)
	}
}

// room is the chat's room, made; rs.mu must be held.
func (rs *rooms) room(chatKey string) *room {
	r := rs.chats[chatKey]
	if r == nil {
		r = &room{subs: map[*sub]bool{}}
		rs.chats[chatKey] = r
	}
	return r
}

// draft sends the answer so far.
func (rs *rooms) draft(ctx context.Context, chatKey, ref, text string) {
	rs.mu.Lock()
	r := rs.room(chatKey)
	v := 1
	if r.draft != nil && r.draft.Ref == ref {
		v = r.draft.Version + 1
	}
	r.draft = &event{Kind: kindDraft, Ref: ref, Text: text, Version: v}
	e := *r.draft
	rs.mu.Unlock()
	rs.publish(chatKey, e)
	rs.tell(ctx, chatKey, e)
}

// undraft forgets the draft ref once its answer is kept.
func (rs *rooms) undraft(chatKey, ref string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.chats[chatKey]; r != nil && r.draft != nil && r.draft.Ref == ref {
		r.draft = nil
		rs.forget(chatKey, r)
	}
}

// working shows or hides the sign that an answer is on its way, and
// keeps it for the pages that open meanwhile, on any process.
func (rs *rooms) working(ctx context.Context, chatKey string, on bool) {
	rs.mu.Lock()
	r := rs.room(chatKey)
	r.working = on
	rs.mu.Unlock()
	e := event{Kind: kindWorking, On: on}
	rs.publish(chatKey, e)
	value := ""
	if on {
		value = "1"
	}
	if err := rs.store.SetState(ctx, workingKey(chatKey), value); err != nil {
		rs.log.Warn("webui: could not keep the working sign; pages opened elsewhere may not show it", "err", err)
	}
	rs.tell(ctx, chatKey, e)
}

// subscribe opens a stream of the chat's events (from before the
// channel runs: its answers come once it does); ok false when the
// channel has stopped or the chat has its most streams open. The
// stream's channel is closed when it ends; cancel ends it.
func (rs *rooms) subscribe(chatKey string) (s *sub, cancel func(), ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return nil, nil, false
	}
	r := rs.room(chatKey)
	if len(r.subs) >= maxStreams {
		rs.forget(chatKey, r)
		return nil, nil, false
	}
	s = &sub{ch: make(chan event, subBuffer)}
	r.subs[s] = true
	return s, func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if r := rs.chats[chatKey]; r != nil && r.subs[s] {
			rs.end(r, s)
			rs.forget(chatKey, r)
		}
	}, true
}

// now is what a stream that starts shows of the answer under way: the
// working sign, on or off (a page that reconnects may have missed its
// end), as kept by whichever process answers, and the draft.
func (rs *rooms) now(ctx context.Context, chatKey string) []event {
	kept, err := rs.store.State(ctx, workingKey(chatKey))
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.chats[chatKey]
	on := kept == "1"
	if err != nil {
		on = r != nil && r.working
	}
	out := []event{{Kind: kindWorking, On: on}}
	if r != nil && r.draft != nil {
		out = append(out, *r.draft)
	}
	return out
}

// newID is a random reference (a draft's).
func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
