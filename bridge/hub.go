package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"loadout/chat"
	"loadout/tools/files"
)

// ErrNotRunning is a notice for a channel not connected yet.
var ErrNotRunning = errors.New("bridge: the chat's channel is not connected")

// ErrNoFiles is SendFile's error for a chat whose channel cannot send
// files: the files tools' own (a Hub is their files.Sender).
var ErrNoFiles = files.ErrCannotSend

var _ files.Sender = (*Hub)(nil)

// Hub holds the running channels and reaches any chat through the channel
// its key names: a notice outside a turn (the Google connect callback), a
// scheduled task's message, a file. One copy for every channel. The zero
// value is ready; it is safe for concurrent use.
type Hub struct {
	mu    sync.RWMutex
	chans map[string]Channel
}

// Add takes a channel; one of the same name is replaced. A channel with
// HTTP endpoints is mounted on mux (when not nil).
func (h *Hub) Add(c Channel, mux *http.ServeMux) {
	h.mu.Lock()
	if h.chans == nil {
		h.chans = map[string]Channel{}
	}
	h.chans[c.Name()] = c
	h.mu.Unlock()
	if m, ok := c.(Mounter); ok && mux != nil {
		m.Mount(mux)
	}
}

// Channels returns the channels, by name.
func (h *Hub) Channels() []Channel {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]Channel, 0, len(h.chans))
	for _, name := range slices.Sorted(maps.Keys(h.chans)) {
		out = append(out, h.chans[name])
	}
	return out
}

// channel is the running channel chatKey's prefix names, or nil.
func (h *Hub) channel(chatKey string) Channel {
	name, _, _ := strings.Cut(chatKey, ":")
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.chans[name]
}

// owner is the channel of chatKey and the chat's route there.
func (h *Hub) owner(chatKey string) (Channel, []byte, error) {
	c := h.channel(chatKey)
	if c == nil {
		return nil, nil, fmt.Errorf("bridge: no running channel delivers to %q", chatKey)
	}
	route, err := c.Route(chatKey)
	if err != nil {
		return nil, nil, err
	}
	return c, route, nil
}

// Notify sends text to a chat outside a turn, in the chat's order with
// its turns, and waits until it is sent. It fails when no running
// channel owns the key, or the channel is not connected yet.
func (h *Hub) Notify(ctx context.Context, chatKey, text string) error {
	c, route, err := h.owner(chatKey)
	if err != nil {
		return err
	}
	if r, ok := c.(Readier); ok && !r.Ready() {
		return ErrNotRunning
	}
	return c.Pipeline().Notify(ctx, chatKey, route, text)
}

// Submit hands a scheduled task's message to a chat as if its person had
// sent it, under an id its inbox dedupes by: stored, then run in order
// with the chat's messages, unattended (nobody is asked to approve
// anything), and answered once.
func (h *Hub) Submit(ctx context.Context, chatKey, userKey, id, text string) error {
	_, err := h.Start(ctx, Pending{ID: id, Unattended: true, Inbound: chat.Inbound{ChatKey: chatKey, UserKey: userKey, Text: text}})
	return err
}

// Start hands an event that did not come from the chat's platform (a
// scheduled task's run, a trigger's request) to the channel of
// p.Inbound.ChatKey: stored in its inbox under p.ID, run in order with
// the chat's messages, and answered in the chat. It reports false when
// the channel already has p.ID (a delivery made again).
func (h *Hub) Start(ctx context.Context, p Pending) (bool, error) {
	c, route, err := h.owner(p.Inbound.ChatKey)
	if err != nil {
		return false, err
	}
	p.Route = route
	return c.Pipeline().Accept(ctx, p)
}

// Tell hands a person's message to a chat as if they had sent it there
// (an approval answered on the web page): stored under id, which the
// inbox dedupes by, run in order with the chat's messages as that person
// (commands bound to them as in the chat), and its answer sent to the
// chat.
func (h *Hub) Tell(ctx context.Context, chatKey, userKey, id, text string) error {
	c, route, err := h.owner(chatKey)
	if err != nil {
		return err
	}
	_, err = c.Pipeline().Accept(ctx, Pending{ID: id, Route: route,
		Inbound: chat.Inbound{ChatKey: chatKey, UserKey: userKey, Text: text}})
	return err
}

// SendFile sends a workspace file, open, to a chat through its channel.
func (h *Hub) SendFile(ctx context.Context, chatKey, name string, f *os.File) error {
	c, route, err := h.owner(chatKey)
	if err != nil {
		return err
	}
	fs, ok := c.(FileSender)
	if !ok {
		return ErrNoFiles
	}
	r, err := c.ReadRoute(route)
	if err != nil {
		return err
	}
	return fs.SendFile(ctx, r, name, f)
}

// Admits reports whether the channel a person's key names ("telegram"
// for "telegram:42") lets them in now (Admitter). A person of a channel
// that does not run here, or cannot judge by a key, is not let in.
func (h *Hub) Admits(ctx context.Context, userKey string) (bool, error) {
	a, ok := h.channel(userKey).(Admitter)
	if !ok {
		return false, nil
	}
	return a.Admits(ctx, userKey)
}

// Private reports whether a chat is one person's; false for a chat of no
// running channel.
func (h *Hub) Private(chatKey string) bool {
	c := h.channel(chatKey)
	return c != nil && c.Private(chatKey)
}

// Invite is how a person in chatKey reaches loadout privately to send
// command: the channel's way (an Inviter), else a plain sentence.
func (h *Hub) Invite(chatKey, command string) string {
	if in, ok := h.channel(chatKey).(Inviter); ok {
		return in.Invite(command)
	}
	return "Send /" + command + " in a private chat with me."
}

// NotReady names the channels not connected to their platform.
func (h *Hub) NotReady() []string {
	var out []string
	for _, c := range h.Channels() {
		if r, ok := c.(Readier); ok && !r.Ready() {
			out = append(out, c.Name())
		}
	}
	return out
}
