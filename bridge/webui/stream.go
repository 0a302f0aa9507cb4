package webui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stream sends the person's chat as Server-Sent Events: first the kept
// events after Last-Event-ID (all that is kept when there is none: the
// page's history), then what is under way (the working sign, the draft),
// then each event as it comes. Kept events carry their id, so a page
// that reconnects resumes where it was, without a part lost or shown
// twice; drafts carry none and are sent whole.
func (c *Chat) stream(w http.ResponseWriter, r *http.Request, user string) {
	key := ChatKey(user)
	after := int64(0)
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			plain(w, http.StatusBadRequest, "Last-Event-ID must be the id of an event this chat sent.")
			return
		}
		after = n
	}
	s, cancel, ok := c.rooms.subscribe(key)
	if !ok {
		w.Header().Set("Retry-After", "5")
		plain(w, http.StatusServiceUnavailable, "The chat is not available just now, or is open in too many tabs.")
		return
	}
	defer cancel()
	// Subscribed first, then read: an event kept meanwhile comes both
	// ways, and is sent once (by its id).
	h, err := c.rooms.history(r.Context(), key)
	if err != nil {
		c.log.Error("webui: could not read a chat's history for its page", "err", err)
		plain(w, http.StatusServiceUnavailable, "The chat could not be read just now; the page tries again.")
		return
	}
	if after >= h.Next {
		// An id this chat never gave (its history was cleared): the
		// page gets all that is kept.
		after = 0
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The server's write timeout is for quick answers: a stream sets its
	// own deadline before each write, so one that stalls is still cut.
	write := func(f func() error) bool {
		rc.SetWriteDeadline(time.Now().Add(c.cfg.KeepAlive + 10*time.Second))
		if err := f(); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	sent := after
	send := func(e event) bool {
		if e.ID != 0 {
			if e.ID <= sent {
				return true
			}
			sent = e.ID
		}
		return write(func() error { return writeEvent(w, e) })
	}
	// A client told how soon to come back after a restart.
	if !write(func() error { _, err := fmt.Fprint(w, "retry: 2000\n\n"); return err }) {
		return
	}
	for _, e := range h.Events {
		if !send(e) {
			return
		}
	}
	if sent < h.Next-1 {
		sent = h.Next - 1
	}
	for _, e := range c.rooms.now(r.Context(), key) {
		if !send(e) {
			return
		}
	}
	// catchUp sends what the chat kept after the last event sent, and
	// the working sign: a stream that was not given an event (told by
	// another process out of order, or not at all) reads the store.
	catchUp := func() bool {
		h, err := c.rooms.history(r.Context(), key)
		if err != nil {
			c.log.Warn("webui: could not read a chat's history for its stream", "err", err)
			return true // the next event tries again
		}
		for _, e := range h.Events {
			if !send(e) {
				return false
			}
		}
		return send(c.rooms.now(r.Context(), key)[0])
	}
	tick := time.NewTicker(c.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case e, open := <-s.ch:
			if !open {
				return
			}
			if e.Fetch || e.ID > sent+1 {
				if !catchUp() {
					return
				}
				if e.Fetch || e.ID <= sent {
					continue
				}
			}
			if !send(e) {
				return
			}
		case <-tick.C:
			if !write(func() error { _, err := fmt.Fprint(w, ": keep-alive\n\n"); return err }) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// writeEvent writes e as one Server-Sent Event: its id when it is kept,
// and its JSON on one data line (JSON escapes every line break).
func writeEvent(w http.ResponseWriter, e event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if e.ID != 0 {
		_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.ID, b)
	} else {
		_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	}
	return err
}
