package slack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	slackapi "github.com/slack-go/slack"

	"loadout/bridge"
)

// isAudio reports whether a shared file is a recording to hear: an audio
// clip recorded in Slack, or an uploaded audio file.
func isAudio(f slackapi.File) bool {
	return strings.HasPrefix(f.Mimetype, "audio/") || f.Filetype == "slack_audio"
}

// takeVoice decides about a shared recording by the size and length
// Slack states, then downloads it (with the bot token, from Slack only)
// into the chat's workspace: the voice note the pipeline transcribes, or
// the sentence that answers the person.
func (a *Adapter) takeVoice(ctx context.Context, chatKey string, f slackapi.File) (note *bridge.VoiceNote, reply string, ok bool) {
	seconds := (f.DurationMs + 999) / 1000
	reply, ok = a.pipe.VoiceRefusal(chatKey, int64(f.Size), seconds)
	switch {
	case !ok || reply != "":
		return nil, reply, ok
	case a.cfg.Files == nil:
		return nil, bridge.TextVoiceNotKept, true
	case f.URLPrivateDownload == "":
		return nil, bridge.TextVoiceNotDownloaded, true
	}
	name := f.Name
	if name == "" {
		name = "voice-" + f.ID + ".m4a"
	}
	limit := int64(maxDownload)
	if max, _ := a.cfg.Voice.Limits(); max > 0 {
		limit = min(limit, max)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(a.api.GetFileContext(ctx, f.URLPrivateDownload, pw))
	}()
	saved, _, err := a.cfg.Files.Save(ctx, chatKey, name, bridge.Capped(pr, limit))
	pr.CloseWithError(io.ErrClosedPipe) // lets the download end if Save stopped early
	switch {
	case errors.Is(err, bridge.ErrTooLarge):
		return nil, fmt.Sprintf(bridge.TextVoiceNotSaved, err), true
	case err != nil:
		a.log.Warn("slack: could not keep a voice note", "file", name, "err", err)
		return nil, bridge.TextVoiceNotDownloaded, true
	}
	return &bridge.VoiceNote{File: saved, Seconds: seconds}, "", true
}

// SendVoice shares OGG/Opus audio in the route's conversation (its
// thread, when it is one) as an audio file. A slash command's private
// answer has no place for one; it is skipped.
func (a *Adapter) SendVoice(ctx context.Context, rt any, audio []byte) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if r.Ephemeral {
		return nil
	}
	return a.retry(ctx, "files.upload", func(ctx context.Context) error {
		_, err := a.api.UploadFileContext(ctx, slackapi.UploadFileParameters{
			Reader: bytes.NewReader(audio), Filename: "answer.ogg", FileSize: len(audio), Title: "Spoken answer",
			Channel: r.Channel, ThreadTimestamp: r.Thread,
		})
		return err
	})
}
