package slack

import (
	"bytes"
	"context"
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
	if reply, ok = a.pipe.VoiceRefusal(chatKey, int64(f.Size), seconds); !ok || reply != "" {
		return nil, reply, ok
	}
	if f.URLPrivateDownload == "" {
		return nil, bridge.TextVoiceNotDownloaded, true
	}
	name := f.Name
	if name == "" {
		name = "voice-" + f.ID + ".m4a"
	}
	note, reply = a.pipe.KeepVoice(ctx, a.cfg.Files, chatKey, name, seconds, maxDownload, func(ctx context.Context) (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(a.api.GetFileContext(ctx, f.URLPrivateDownload, pw)) }()
		return pr, nil // closing it lets the download end if the save stopped early
	})
	return note, reply, true
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
