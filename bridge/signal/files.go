package signal

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"loadout/bridge"
	"loadout/tools/files"
)

// maxFile is the largest attachment Signal carries: 100 MB.
const maxFile = 100 << 20

// fetch reads an attachment signal-cli keeps, through getAttachment,
// held to maxFile whatever size the message stated.
func (a *Adapter) fetch(ctx context.Context, r route, at attachment) (io.ReadCloser, error) {
	params := map[string]any{"id": at.ID}
	if r.Group != "" {
		params["groupId"] = r.Group
	} else {
		params["recipient"] = r.To
	}
	var got struct {
		Data string `json:"data"`
	}
	if err := a.rpc.do(ctx, "getAttachment", params, &got); err != nil {
		return nil, err
	}
	if base64.StdEncoding.DecodedLen(len(got.Data)) > maxFile+3 {
		return nil, fmt.Errorf("%w: the attachment is larger than Signal's 100 MB", bridge.ErrTooLarge)
	}
	b, err := base64.StdEncoding.DecodeString(got.Data)
	if err != nil {
		return nil, fmt.Errorf("signal-cli getAttachment: the data is not base64: %w", err)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// name is the name an attachment is kept under: its own, or one made of
// its id and type.
func (at attachment) name() string {
	if n := path.Base(strings.ReplaceAll(at.Filename, "\\", "/")); at.Filename != "" && n != "." && n != "/" {
		return n
	}
	ext := ".bin"
	if _, sub, ok := strings.Cut(at.ContentType, "/"); ok && sub != "" && len(sub) <= 10 && !strings.ContainsAny(sub, "/\\. ") {
		ext = "." + sub
	}
	id := at.ID
	if len(id) > 20 {
		id = id[:20]
	}
	return "signal-" + strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return c
		}
		return '-'
	}, id) + ext
}

// keepFile keeps an attachment in the chat's workspace and returns the
// note the model reads about it, and its name again when it is an image.
func (a *Adapter) keepFile(ctx context.Context, chatKey string, r route, at attachment) (note, image string) {
	name, mimeType := at.name(), at.ContentType
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	switch {
	case a.cfg.Files == nil:
		return bridge.FileNotKept(name, "files are not kept in this setup"), ""
	case at.Size > maxFile:
		return bridge.FileNotKept(name, "it is larger than Signal's 100 MB"), ""
	}
	body, err := a.fetch(ctx, r, at)
	if err != nil {
		a.log.Warn("signal: could not fetch a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, "it could not be read from signal-cli"), ""
	}
	defer body.Close()
	saved, n, err := a.cfg.Files.Save(ctx, chatKey, name, body)
	if err != nil {
		a.log.Warn("signal: could not keep a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, err.Error()), ""
	}
	if files.IsImage(mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, mimeType, n), image
}

// takeVoice decides about an audio attachment by the size Signal states
// (it states no length), then keeps it in the chat's workspace: the
// note the pipeline transcribes, or a sentence that answers the person.
func (a *Adapter) takeVoice(ctx context.Context, chatKey string, r route, at attachment) (note *bridge.VoiceNote, reply string, ok bool) {
	if reply, ok = a.pipe.VoiceRefusal(chatKey, at.Size, 0); !ok || reply != "" {
		return nil, reply, ok
	}
	note, reply = a.pipe.KeepVoice(ctx, a.cfg.Files, chatKey, at.name(), 0, maxFile,
		func(ctx context.Context) (io.ReadCloser, error) { return a.fetch(ctx, r, at) })
	return note, reply, true
}

// SendFile sends a workspace file to the route's chat as an attachment.
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	content, err := io.ReadAll(bridge.Capped(f, maxFile))
	if err != nil {
		return fmt.Errorf("signal: %s: %w", name, err)
	}
	r.QuoteTS, r.QuoteAuthor = 0, ""
	_, err = a.send(ctx, r, "", dataURI(name, content))
	return err
}
