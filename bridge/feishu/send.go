package feishu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"loadout/bridge"
)

// MaxMessage is the longest part sent, in characters: Feishu takes a
// rich-text message of up to 150 KB, but a long answer reads better in
// parts, as on the other channels.
const MaxMessage = 4000

// Split cuts a Markdown answer into parts of at most MaxMessage
// characters, never leaving a code block open across two.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, MaxMessage) }

// post is a rich-text message holding Markdown md, which Feishu renders
// (bold, italics, links, lists, code).
func post(md string) map[string]any {
	return map[string]any{"zh_cn": map[string]any{"content": [][]map[string]string{{{"tag": "md", "text": md}}}}}
}

// partUUID is the idempotency key of the part being sent, when the
// pipeline names one: the same at every try and after a restart, so
// Feishu sends the part once. Feishu takes at most 50 characters.
func partUUID(ctx context.Context) string {
	key, ok := bridge.PartKey(ctx)
	if !ok {
		return ""
	}
	sum := sha256.Sum256([]byte("feishu:" + key))
	return hex.EncodeToString(sum[:16])
}

// Send sends one part to the route's chat.
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	_, err = a.api.message(ctx, r, "post", post(part), partUUID(ctx))
	return err
}

// maxEdits is how often a draft is edited: Feishu lets a message be
// edited 20 times, and the last is the answer's (Replace).
const maxEdits = 18

// Draft shows the answer so far: a message posted the first time, then
// edited (until maxEdits, after which it waits for the answer).
func (a *Adapter) Draft(ctx context.Context, rt any, draft []byte, text string) ([]byte, error) {
	r, err := asRoute(rt)
	if err != nil {
		return nil, err
	}
	if draft == nil {
		id, err := a.api.message(ctx, r, "post", post(text), "")
		if err != nil {
			return nil, err
		}
		return []byte(id), nil
	}
	a.mu.Lock()
	if a.edits == nil {
		a.edits = map[string]int{}
	}
	n := a.edits[string(draft)]
	if n < maxEdits {
		a.edits[string(draft)] = n + 1
	}
	a.mu.Unlock()
	if n >= maxEdits {
		return draft, nil
	}
	return draft, a.api.edit(ctx, string(draft), post(text))
}

// Replace turns the draft into part, the answer's first message.
func (a *Adapter) Replace(ctx context.Context, rt any, draft []byte, part string) error {
	a.mu.Lock()
	delete(a.edits, string(draft))
	a.mu.Unlock()
	return a.api.edit(ctx, string(draft), post(part))
}

// edit replaces the content of message id, a rich-text message.
func (c *api) edit(ctx context.Context, id string, content any) error {
	text, err := json.Marshal(content)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(map[string]string{"msg_type": "post", "content": string(text)})
	if !plainID(id) {
		return &APIError{Code: -1, Msg: "not a message id"}
	}
	return c.call(ctx, "edit a message", sendAttempts, func(ctx context.Context, token string) error {
		return c.send(ctx, http.MethodPut, "/open-apis/im/v1/messages/"+id, token, bytes.NewReader(raw), "application/json; charset=utf-8", nil)
	})
}
