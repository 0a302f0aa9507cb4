package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"loadout/bridge"
	"loadout/tools/files"
)

// sharesFiles reports whether an inner event carries files.
func sharesFiles(inner any) bool {
	switch e := inner.(type) {
	case *slackevents.MessageEvent:
		return e.Message != nil && len(e.Message.Files) > 0
	case *slackevents.AppMentionEvent:
		return len(e.Files) > 0
	}
	return false
}

// maxDownload is the largest shared file kept.
const maxDownload = 50 << 20

// keepFile downloads a file a person shared into the chat's workspace and
// returns the note the model reads about it. The client library sends
// the bot token only to Slack's own hosts (or the configured API's).
func (a *Adapter) keepFile(ctx context.Context, chatKey string, f slackapi.File) (note, image string) {
	name := f.Name
	if name == "" {
		name = "file"
	}
	mimeType := f.Mimetype
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	switch {
	case a.cfg.Files == nil:
		return bridge.FileNotKept(name, "files are not kept in this setup"), ""
	case f.Size > maxDownload:
		return bridge.FileNotKept(name, fmt.Sprintf("it is larger than %d MB", maxDownload>>20)), ""
	case f.URLPrivateDownload == "":
		return bridge.FileNotKept(name, "Slack gave no download link for it"), ""
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(a.api.GetFileContext(ctx, f.URLPrivateDownload, pw))
	}()
	// Held to maxDownload whatever size Slack stated: a larger body
	// fails, and the saver removes what it wrote.
	saved, n, err := a.cfg.Files.Save(ctx, chatKey, name, bridge.Capped(pr, maxDownload))
	pr.CloseWithError(io.ErrClosedPipe) // lets the download end if Save stopped early
	if errors.Is(err, bridge.ErrTooLarge) {
		return bridge.FileNotKept(name, fmt.Sprintf("it is larger than %d MB", maxDownload>>20)), ""
	}
	if err != nil {
		a.log.Warn("slack: could not keep a file a person shared", "file", name, "err", err)
		return bridge.FileNotKept(name, "it could not be downloaded from Slack"), ""
	}
	if files.IsImage(mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, mimeType, n), image
}

// SendFile uploads a workspace file to the route's conversation (its
// thread, when it is one) with Slack's upload flow
// (files.getUploadURLExternal, the upload, then
// files.completeUploadExternal sharing it in the conversation).
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	channel, thread := r.Channel, r.Thread
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return fmt.Errorf("slack: %s is empty; Slack takes no empty files", name)
	}
	return a.retry(ctx, "files.upload", func(ctx context.Context) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := a.api.UploadFileContext(ctx, slackapi.UploadFileParameters{
			Reader: f, Filename: name, FileSize: int(st.Size()), Title: name, Channel: channel, ThreadTimestamp: thread,
		})
		return err
	})
}
