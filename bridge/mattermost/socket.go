package mattermost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// The websocket, and reading back what was posted while it was down.

// pingEvery is how often the channel pings the server; a connection
// silent for three times as long is taken as dropped.
const pingEvery = 30 * time.Second

// perPage is how many posts one read of a channel asks for, and
// maxPages how many pages one channel's reading back reads at most.
const (
	perPage  = 200
	maxPages = 50
)

// listen keeps a websocket to the server until ctx ends: it connects,
// reads back what was posted since the last post stored, takes the
// posted events, and connects again when the connection drops, with
// backoff while the server cannot be reached.
func (a *Adapter) listen(ctx context.Context) error {
	a.log.Info("mattermost: this process holds the websocket")
	b := a.policy().New()
	for {
		err := a.session(ctx, func() { b.Reset(); a.setListening(true) })
		a.setListening(false)
		if ctx.Err() != nil {
			return nil
		}
		wait := b.Next()
		if rejected(err) {
			a.log.Error("mattermost rejected mattermost.token on the websocket; retrying", "wait", wait)
		} else {
			a.log.Warn("mattermost: the websocket dropped or cannot be reached; reconnecting", "err", err, "wait", wait)
		}
		if b.Wait(ctx, wait) != nil {
			return nil
		}
	}
}

// listening reports whether this process holds a websocket and has
// read back what it missed.
func (a *Adapter) listening() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live
}

func (a *Adapter) setListening(on bool) {
	a.mu.Lock()
	a.live = on
	a.mu.Unlock()
}

// event is a websocket message: an event, or the answer to a request of
// the channel's (seq_reply).
type event struct {
	Event    string          `json:"event"`
	Data     json.RawMessage `json:"data"`
	Status   string          `json:"status"`
	SeqReply int             `json:"seq_reply"`
}

// posted is the data of a posted event: the post, as a JSON string.
type posted struct {
	Post        string `json:"post"`
	ChannelType string `json:"channel_type"`
}

// postOf reads a posted event's data: the post and its channel's type.
func postOf(data []byte) (*post, string, bool) {
	var d posted
	var p post
	if json.Unmarshal(data, &d) != nil || json.Unmarshal([]byte(d.Post), &p) != nil || p.ID == "" || p.ChannelID == "" {
		return nil, "", false
	}
	return &p, d.ChannelType, true
}

// session is one connection: it returns why it ended. connected is
// called once the connection is authenticated and what it missed read
// back.
func (a *Adapter) session(ctx context.Context, connected func()) error {
	ws, err := a.dial(ctx)
	if err != nil {
		return err
	}
	defer ws.Close()
	defer context.AfterFunc(ctx, func() { ws.Close() })()
	alive := func() { ws.SetReadDeadline(time.Now().Add(3 * pingEvery)) }
	alive()
	ws.SetPongHandler(func(string) error { alive(); return nil })
	ws.SetPingHandler(func(data string) error {
		alive()
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
	})
	pinger, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-pinger.Done():
				return
			case <-t.C:
				ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second))
			}
		}
	}()
	if err := a.catchUp(ctx); err != nil {
		return err
	}
	connected()
	for {
		var ev event
		if err := ws.ReadJSON(&ev); err != nil {
			return err
		}
		alive()
		if ev.Event != "posted" {
			continue
		}
		p, kind, ok := postOf(ev.Data)
		if !ok {
			a.log.Warn("mattermost: a posted event that is not a post; ignored")
			continue
		}
		if err := a.take(ctx, p, kind); err != nil {
			return err // read back from the cursor on the next connection
		}
	}
}

// socketURL is the websocket's address on the server.
func socketURL(base string) string {
	switch {
	case strings.HasPrefix(base, "https://"):
		base = "wss://" + strings.TrimPrefix(base, "https://")
	case strings.HasPrefix(base, "http://"):
		base = "ws://" + strings.TrimPrefix(base, "http://")
	}
	return base + "/api/v4/websocket"
}

// dial connects the websocket and authenticates it with the token.
func (a *Adapter) dial(ctx context.Context) (*websocket.Conn, error) {
	d := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second}
	ws, resp, err := d.DialContext(ctx, socketURL(a.cfg.URL), nil)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, &apiError{Status: resp.StatusCode}
		}
		return nil, err
	}
	ws.SetReadLimit(maxResponse)
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	challenge := map[string]any{"seq": 1, "action": "authentication_challenge", "data": map[string]string{"token": a.cfg.Token}}
	if err := ws.WriteJSON(challenge); err != nil {
		ws.Close()
		return nil, err
	}
	for range 16 {
		var ev event
		if err := ws.ReadJSON(&ev); err != nil {
			ws.Close()
			return nil, err
		}
		if ev.SeqReply != 1 {
			continue // hello, before or after the answer
		}
		if ev.Status != "OK" {
			ws.Close()
			return nil, &apiError{Status: http.StatusUnauthorized, ID: "authentication_challenge"}
		}
		return ws, nil
	}
	ws.Close()
	return nil, errors.New("mattermost: the websocket did not answer its authentication")
}

// The cursors: in the store's small states, each channel's last post
// taken ("mattermost:cursor:<channel>" = "<create_at>:<post id>"), and
// when the channel first ran ("mattermost:since", in ms): a channel
// without a cursor is read back from then, so what was posted before is
// not answered.
const sinceKey = "mattermost:since"

func cursorKey(channel string) string { return "mattermost:cursor:" + channel }

// cursor is where reading a channel back starts: after post ID, made at
// At (ms).
type cursor struct {
	At int64
	ID string
}

func readCursor(v string) cursor {
	at, id, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || !isID(id) {
		return cursor{}
	}
	return cursor{At: n, ID: id}
}

func (c cursor) String() string { return fmt.Sprintf("%d:%s", c.At, c.ID) }

// before orders cursors as their posts were made.
func (c cursor) before(d cursor) bool { return c.At < d.At || c.At == d.At && c.ID < d.ID }

func sortPosts(ps []*post) {
	slices.SortFunc(ps, func(x, y *post) int {
		cx, cy := cursor{x.CreateAt, x.ID}, cursor{y.CreateAt, y.ID}
		switch {
		case cx.before(cy):
			return -1
		case cy.before(cx):
			return 1
		}
		return 0
	})
}

// advance moves channel's cursor to p, never back. Several processes may
// write it (one that lost the websocket writes late): it is swapped, so
// a later cursor is never undone.
func (a *Adapter) advance(ctx context.Context, p *post) error {
	next := cursor{p.CreateAt, p.ID}
	for range 8 {
		old, err := a.store.State(ctx, cursorKey(p.ChannelID))
		if err != nil {
			return err
		}
		if !readCursor(old).before(next) && old != "" {
			return nil
		}
		if ok, err := a.store.SwapState(ctx, cursorKey(p.ChannelID), old, next.String()); ok || err != nil {
			return err
		}
	}
	return errors.New("mattermost: a channel's cursor kept changing")
}

// since is when the channel first ran, in ms, kept from its first run.
func (a *Adapter) since(ctx context.Context) (int64, error) {
	v, err := a.store.State(ctx, sinceKey)
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, nil
	}
	now := time.Now().UnixMilli()
	if _, err := a.store.SwapState(ctx, sinceKey, v, strconv.FormatInt(now, 10)); err != nil {
		return 0, err
	}
	v, err = a.store.State(ctx, sinceKey)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n, err
}

// catchUp reads back, through the inbox, each of the bot's channels'
// posts after its cursor (or since the first run), oldest first. An
// error means a post could not be read or stored; the next connection
// reads it back again.
func (a *Adapter) catchUp(ctx context.Context) error {
	since, err := a.since(ctx)
	if err != nil {
		return err
	}
	var chans []channelInfo
	if err := a.api.retry(ctx, func(ctx context.Context) (err error) { chans, err = a.api.channels(ctx); return err }); err != nil {
		return err
	}
	for _, ch := range chans {
		v, err := a.store.State(ctx, cursorKey(ch.ID))
		if err != nil {
			return err
		}
		cur := readCursor(v)
		if ch.LastPostAt > 0 && (cur.ID == "" && ch.LastPostAt < since || cur.ID != "" && ch.LastPostAt <= cur.At) {
			continue // nothing new
		}
		if err := a.readBack(ctx, ch, cur, since); err != nil {
			return err
		}
	}
	return nil
}

// readBack reads one channel's posts after cur, or when it has none its
// latest made since the first run, and takes them in order.
func (a *Adapter) readBack(ctx context.Context, ch channelInfo, cur cursor, since int64) error {
	taken, after := 0, cur.ID
	for range maxPages {
		var ps []*post
		err := a.api.retry(ctx, func(ctx context.Context) (err error) {
			ps, err = a.api.postsAfter(ctx, ch.ID, after, perPage)
			return err
		})
		if err != nil {
			return fmt.Errorf("mattermost: read back channel %s: %w", ch.ID, err)
		}
		if after == "" {
			ps = slices.DeleteFunc(ps, func(p *post) bool { return p.CreateAt < since })
		}
		for _, p := range ps {
			if err := a.take(ctx, p, ch.Type); err != nil {
				return err
			}
			taken++
		}
		if len(ps) > 0 {
			last := ps[len(ps)-1]
			if err := a.advance(ctx, last); err != nil {
				return err
			}
			after = last.ID
		}
		if len(ps) < perPage {
			break
		}
	}
	if taken > 0 {
		a.log.Info("mattermost: read back posts made while disconnected", "channel_id", ch.ID, "count", taken)
	}
	return nil
}
