package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"loadout/backoff"
	"loadout/bridge"
	"loadout/tools/files"
)

// MaxMedia is the largest file taken or sent: WhatsApp's limit for a
// document. A download stops there whatever size was stated.
const MaxMedia = 100 << 20

// downloadPolicy is how often a media download is tried before the
// person is told: four times, waiting 1s, 2s and 4s.
func (a *Adapter) downloadPolicy() backoff.Policy {
	return backoff.Policy{Attempts: 4, Initial: time.Second, Max: 8 * time.Second, Sleep: a.cfg.sleep,
		OnRetry: func(err error, wait time.Duration) {
			a.log.Warn("whatsapp: a file could not be downloaded from WhatsApp; trying again", "wait", wait, "err", err)
		}}
}

// final reports a download failure that trying again cannot mend.
func final(err error) (bool, time.Duration) {
	if errors.Is(err, bridge.ErrTooLarge) || errors.Is(err, context.Canceled) {
		return false, 0
	}
	var ae *APIError
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests && ae.Status != http.StatusRequestTimeout {
		return false, 0
	}
	return true, 0
}

// mediaName is the name a file is kept under: the document's own, or
// its kind and media id with the extension of its type.
func mediaName(kind string, f *mediaRef) string {
	if f.Filename != "" {
		return f.Filename
	}
	ext := ""
	mt, _, _ := strings.Cut(f.MimeType, ";")
	if exts, _ := mime.ExtensionsByType(strings.TrimSpace(mt)); len(exts) > 0 {
		ext = exts[0]
	}
	return kind + "-" + f.ID + ext
}

// keepMedia downloads a picture, document, video or sticker into the
// chat's workspace, trying again with backoff, and returns the note the
// model reads about it (and its name when the model may look at it),
// or the sentence that answers the person when it could not be
// downloaded.
func (a *Adapter) keepMedia(ctx context.Context, key, kind string, f *mediaRef) (note, image, reply string) {
	name := mediaName(kind, f)
	if a.cfg.Files == nil {
		return bridge.FileNotKept(name, "files are not kept in this setup"), "", ""
	}
	var saved, mimeType string
	var size int64
	err := a.downloadPolicy().Do(ctx, final, func(ctx context.Context) error {
		info, err := a.api.mediaInfo(ctx, f.ID)
		if err != nil {
			return err
		}
		if int64(info.Size) > a.cfg.maxMedia {
			return fmt.Errorf("%w (%d bytes stated)", bridge.ErrTooLarge, info.Size)
		}
		mimeType = info.MimeType
		body, err := a.api.download(ctx, info.URL, a.cfg.maxMedia)
		if err != nil {
			return err
		}
		defer body.Close()
		saved, size, err = a.cfg.Files.Save(ctx, key, name, body)
		return err
	})
	switch {
	case errors.Is(err, bridge.ErrTooLarge):
		return bridge.FileNotKept(name, fmt.Sprintf("it is larger than %s", megabytes(a.cfg.maxMedia))), "", ""
	case err != nil:
		a.log.Error("whatsapp: a file a person sent could not be downloaded; they are told", "file", name, "err", err)
		return "", "", fmt.Sprintf(TextMediaFailed, name)
	}
	mimeType, _, _ = strings.Cut(cmpOr(mimeType, f.MimeType, "application/octet-stream"), ";")
	if files.IsImage(mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, mimeType, size), image, ""
}

// megabytes renders a limit for people: "100 MB", or bytes below one.
func megabytes(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func cmpOr(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// documentType is the type a file is uploaded as: WhatsApp takes plain
// text, PDF and office documents, so other text goes as plain text.
func documentType(name string) string {
	t, _, _ := strings.Cut(mime.TypeByExtension(strings.ToLower(filepath.Ext(name))), ";")
	switch {
	case t == "":
		return "application/octet-stream"
	case strings.HasPrefix(t, "text/"):
		return "text/plain"
	}
	return t
}

// SendFile uploads a workspace file to the number's media and sends it
// to the route's person as a document under its name. Outside the
// 24-hour window it fails with ErrWindowClosed.
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > MaxMedia {
		return fmt.Errorf("whatsapp: %s is %d bytes, more than the 100 MB WhatsApp takes", name, st.Size())
	}
	open, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	if !open {
		return ErrWindowClosed
	}
	id, err := a.api.upload(ctx, name, documentType(name), f)
	if err != nil {
		return err
	}
	sent, err := a.api.message(ctx, r.To, map[string]any{"type": "document", "document": map[string]string{"id": id, "filename": name}})
	if err != nil {
		return err
	}
	a.record(ctx, r.To, sentPart{ID: sent, Try: 1})
	return nil
}

// downloadVoice opens a voice note's audio, looked up and opened with
// the download's tries.
func (a *Adapter) downloadVoice(ctx context.Context, u string) (io.ReadCloser, error) {
	var body io.ReadCloser
	err := a.downloadPolicy().Do(ctx, final, func(ctx context.Context) error {
		var err error
		body, err = a.api.download(ctx, u, a.cfg.maxMedia)
		return err
	})
	return body, err
}
