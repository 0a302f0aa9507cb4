package mattermost

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode"

	"loadout/bridge"
)

// Split cuts a Markdown answer into posts of at most MaxMessage
// characters, never leaving a code block open across two.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, a.cfg.MaxMessage) }

// Send posts one part to the route (Mattermost renders the model's
// Markdown as it is).
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	_, err = a.post(ctx, newPost{ChannelID: r.Channel, RootID: r.Root, Message: part, PendingID: a.pendingID(ctx, "")})
	return err
}

// pendingID names the part of an answer being sent (bridge.PartKey), and
// which of its posts when it takes two (salt), as a client's
// pending_post_id ("<user id>:<number>"), so that the server answers a
// post created again (after a lost answer, or a crash before its sending
// was recorded) with the first one; "" for anything else (a notice).
func (a *Adapter) pendingID(ctx context.Context, salt string) string {
	key, ok := bridge.PartKey(ctx)
	self, _ := a.bot()
	if !ok || self == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key + "\x00" + salt))
	return fmt.Sprintf("%s:%d", self, binary.BigEndian.Uint64(sum[:8])%1e13)
}

// post creates p, trying again while the server fails or limits the
// rate, and returns its id.
func (a *Adapter) post(ctx context.Context, p newPost) (string, error) {
	var id string
	err := a.api.retry(ctx, func(ctx context.Context) (err error) {
		id, err = a.api.createPost(ctx, p)
		return err
	})
	return id, err
}

// Working shows "typing…" in the route's channel (and thread) until
// stop is called, renewed every TypingInterval.
func (a *Adapter) Working(ctx context.Context, rt any) (stop func()) {
	r, ok := rt.(route)
	self, _ := a.bot()
	if !ok || self == "" {
		return func() {}
	}
	return bridge.Renew(ctx, a.cfg.TypingInterval, func(ctx context.Context) {
		in := map[string]string{"channel_id": r.Channel, "parent_id": r.Root}
		if err := a.api.call(ctx, http.MethodPost, "/users/"+self+"/typing", in, nil); err != nil && ctx.Err() == nil {
			a.log.Debug("mattermost: could not show typing", "err", err)
		}
	})
}

// Draft shows the answer so far: the first call posts it, later ones
// edit that post. Text beyond one post is left for the parts that
// follow.
func (a *Adapter) Draft(ctx context.Context, rt any, draft []byte, text string) ([]byte, error) {
	r, err := asRoute(rt)
	if err != nil {
		return nil, err
	}
	text = a.draftText(text)
	if draft == nil {
		id, err := a.post(ctx, newPost{ChannelID: r.Channel, RootID: r.Root, Message: text})
		if err != nil {
			return nil, err
		}
		return []byte(id), nil
	}
	return draft, a.edit(ctx, string(draft), text, nil)
}

// Replace edits the draft into part. When the draft is gone (deleted by
// the person), the part is posted anew.
func (a *Adapter) Replace(ctx context.Context, rt any, draft []byte, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	err = a.edit(ctx, string(draft), part, nil)
	if e, ok := err.(*apiError); ok && (e.Status == http.StatusNotFound || e.Status == http.StatusForbidden) {
		_, err = a.post(ctx, newPost{ChannelID: r.Channel, RootID: r.Root, Message: part, PendingID: a.pendingID(ctx, "")})
	}
	return err
}

// edit changes post id's message (and its props when not nil).
func (a *Adapter) edit(ctx context.Context, id, text string, props map[string]any) error {
	return a.api.retry(ctx, func(ctx context.Context) error { return a.api.patchPost(ctx, id, text, props) })
}

// draftText fits the answer so far in one post, marked as unfinished.
func (a *Adapter) draftText(text string) string {
	const more = " …"
	if len([]rune(text))+len([]rune(more)) > a.cfg.MaxMessage {
		text = bridge.Split(text, a.cfg.MaxMessage-len([]rune(more)))[0]
	}
	return strings.TrimRightFunc(text, unicode.IsSpace) + more
}

// SendFile uploads a workspace file to the route's channel and posts it
// there (in the route's thread).
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > maxDownload {
		return fmt.Errorf("mattermost: %s is %d bytes, more than the 100 MB a server takes by default", name, st.Size())
	}
	var id string
	err = a.api.retry(ctx, func(ctx context.Context) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var err error
		id, err = a.api.upload(ctx, r.Channel, name, f)
		return err
	})
	if err != nil {
		return err
	}
	_, err = a.post(ctx, newPost{ChannelID: r.Channel, RootID: r.Root, FileIDs: []string{id}})
	return err
}
