package signal

import (
	"context"
	"encoding/base64"
	"errors"
	"mime"
	"net/url"
	"path"
	"sync"

	"loadout/bridge"
)

// Split cuts an answer into messages of at most MaxMessage characters,
// never leaving a code block open across two. Signal shows text as it
// is: the Markdown a model writes reads as plain text.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, MaxMessage) }

// Send sends one part to the route's chat.
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	_, err = a.send(ctx, r, part)
	return err
}

// sent is what the send method returns: the message's timestamp, which
// names it in reactions and quotes.
type sent struct {
	Timestamp int64 `json:"timestamp"`
}

// send sends text (and the attachments, data URIs) to r, quoting the
// person's message in a group, and returns its timestamp.
func (a *Adapter) send(ctx context.Context, r route, text string, attachments ...string) (int64, error) {
	params := r.target(map[string]any{"message": text})
	if r.QuoteTS != 0 && r.QuoteAuthor != "" {
		params["quoteTimestamp"], params["quoteAuthor"] = r.QuoteTS, r.QuoteAuthor
	}
	if len(attachments) > 0 {
		params["attachments"] = attachments
	}
	var s sent
	err := a.rpc.do(ctx, "send", params, &s)
	var re *RPCError
	if errors.As(err, &re) && re.Code == codeUntrusted {
		a.log.Error("signal: the recipient's safety number changed, so signal-cli will not send to them until it is trusted again (signal-cli trust)",
			"chat", r.chatKey())
	}
	return s.Timestamp, err
}

// dataURI is a file as signal-cli's send takes it:
// data:<type>;filename=<name>;base64,<content>.
func dataURI(name string, content []byte) string {
	t := mime.TypeByExtension(path.Ext(name))
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		t = mt
	} else {
		t = "application/octet-stream"
	}
	return "data:" + t + ";filename=" + url.QueryEscape(name) + ";base64," + base64.StdEncoding.EncodeToString(content)
}

// SendVoice sends OGG/Opus audio to the route as a voice note.
func (a *Adapter) SendVoice(ctx context.Context, rt any, audio []byte) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	params := r.target(map[string]any{"attachments": []string{dataURI("answer.ogg", audio)}, "voiceNote": true})
	return a.rpc.do(ctx, "send", params, nil)
}

// Working shows "typing…" in the route's chat until stop is called, then
// takes it away.
func (a *Adapter) Working(ctx context.Context, rt any) (stop func()) {
	r, ok := rt.(route)
	if !ok {
		return func() {}
	}
	typing := func(ctx context.Context, done bool) {
		params := r.target(map[string]any{})
		if done {
			params["stop"] = true
		}
		if err := a.rpc.call(ctx, "sendTyping", params, nil); err != nil && ctx.Err() == nil {
			a.log.Debug("signal: could not show typing", "err", err)
		}
	}
	renew := bridge.Renew(ctx, a.cfg.TypingInterval, func(ctx context.Context) { typing(ctx, false) })
	var once sync.Once
	return func() {
		once.Do(func() {
			renew()
			if ctx.Err() == nil {
				typing(ctx, true)
			}
		})
	}
}
