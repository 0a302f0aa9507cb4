package email

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"

	"loadout/bridge"
)

// keepFile keeps a file that came with a message in the chat's
// workspace and returns the note the model reads about it.
func (a *Adapter) keepFile(ctx context.Context, key string, f attached) string {
	if a.cfg.Files == nil {
		return bridge.FileNotKept(f.name, "files are not kept in this setup")
	}
	saved, n, err := a.cfg.Files.Save(ctx, key, f.name, bytes.NewReader(f.data))
	if err != nil {
		a.log.Warn("email: could not keep a file a person sent", "file", f.name, "err", err)
		return bridge.FileNotKept(f.name, err.Error())
	}
	return bridge.FileNote(saved, f.mimeType, n)
}

// maxAttachment is the largest file sent as an attachment: most mail
// servers take messages up to 25 MB, and base64 makes a file a third
// larger.
const maxAttachment = 18 << 20

// SendFile mails a workspace file to the route's person, as a reply in
// the chat's thread.
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > maxAttachment {
		return fmt.Errorf("email: %s is %d bytes, more than the %d MB sent by e-mail", name, st.Size(), maxAttachment>>20)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxAttachment+1))
	if err != nil {
		return fmt.Errorf("email: read %s: %w", name, err)
	}
	mimeType := mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	return a.mail(ctx, r, "", &attached{name: filepath.Base(name), mimeType: mimeType, data: data})
}
