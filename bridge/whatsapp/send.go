package whatsapp

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"loadout/bridge"
)

// Split cuts a Markdown answer into messages of at most MaxMessage
// characters, never leaving a code block open across two. Converting a
// part to WhatsApp's formatting never lengthens it.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, MaxMessage) }

// textMessage is a text message of Markdown md, in WhatsApp's
// formatting, links shown as written (no preview).
func textMessage(md string) map[string]any {
	return map[string]any{"type": "text", "text": map[string]any{"body": fit(Format(md), MaxMessage), "preview_url": false}}
}

// fit cuts s to n characters; a part Split made always fits already.
func fit(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Send sends one part to the route's person. Outside the 24-hour window
// it is held for their next message instead (and reengage_template
// sent): that is not an error, as the part is kept to be given. A
// message WhatsApp refuses for the window after all is held the same
// way.
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	return a.deliver(ctx, r, part, textMessage(part))
}

// deliver sends m, a message whose text is md, unless the window is
// closed; then it holds md. The chat's states are held meanwhile, so
// that news of the message (a failed status) waits until the message
// is in the chat's record.
func (a *Adapter) deliver(ctx context.Context, r route, md string, m map[string]any) error {
	open, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	unlock := a.lock(r.To)
	defer unlock()
	if !open {
		return a.holdLocked(ctx, r.To, md)
	}
	id, err := a.api.message(ctx, r.To, m)
	if ae, ok := errors.AsType[*APIError](err); ok && ae.Code == codeWindow {
		return a.holdLocked(ctx, r.To, md)
	}
	if err != nil {
		return err
	}
	a.recordLocked(ctx, r.To, sentPart{ID: id, Text: md, Try: 1})
	return nil
}

// typingEvery renews "typing…", which WhatsApp shows for 25 seconds.
const typingEvery = 20 * time.Second

// Working marks the person's message read and shows "typing…" until
// stop is called. A route without a message (a notice, a scheduled
// task) shows nothing.
func (a *Adapter) Working(ctx context.Context, rt any) (stop func()) {
	r, ok := rt.(route)
	if !ok || r.Msg == "" {
		return func() {}
	}
	return bridge.Renew(ctx, typingEvery, func(ctx context.Context) {
		if err := a.api.read(ctx, r.Msg, true); err != nil && ctx.Err() == nil {
			a.log.Debug("whatsapp: could not mark a message read or show typing", "err", err)
		}
	})
}
