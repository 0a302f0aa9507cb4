package slack

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"loadout/bridge/slack/slacktest"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

const heard = "Remind me to call the dentist tomorrow at nine."

func voiceOptions(t *testing.T, mut func(*voice.Config)) (options, *voicetest.Server) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	audio := voicetest.New(t, heard)
	cfg := voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Reply: voice.ReplyWhenSpoken}
	if mut != nil {
		mut(&cfg)
	}
	svc := voice.New(cfg.WithDefaults("", ""), voice.Options{Workspace: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	return options{files: ws, voice: svc}, audio
}

// An audio clip recorded in Slack is downloaded with the bot token,
// transcribed once, answered from its transcript, and the answer shared
// as audio too; Slack's retry of the event transcribes nothing again.
func TestSlackAudioClipIsHeardAndAnsweredAloud(t *testing.T) {
	o, audio := voiceOptions(t, nil)
	h := start(t, o)
	h.env.Model.Text("I'll remind you.")
	e := h.fake.DMWithFile("D1", owner, "", "100.1", slacktest.File{Name: "audio_message.m4a", MIME: "audio/mp4", Type: "slack_audio",
		Content: voicetest.Note(t), Seconds: 3})
	h.event(t, "Ev1", e)
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	last := h.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.HasPrefix(got, "(voice message) "+heard+"\n[The voice note's audio is kept in this chat's workspace as audio_message.m4a.]") {
		t.Fatalf("the model read %q", got)
	}
	tr := audio.Transcriptions()
	if len(tr) != 1 || tr[0].FileName != "audio_message.m4a" || tr[0].Model != "whisper-1" || !bytes.Equal(tr[0].Audio, voicetest.Note(t)) {
		t.Fatalf("%d transcriptions", len(tr))
	}
	h.fake.WaitFor(t, "the spoken answer", func() bool { return len(h.fake.Uploads()) == 1 })
	if up := h.fake.Uploads()[0]; up.Channel != "D1" || !bytes.Equal(up.Content, audio.Audio()) {
		t.Fatalf("the spoken answer went to %q with %d bytes", up.Channel, len(up.Content))
	}
	h.event(t, "Ev1", e) // Slack's retry
	h.env.Model.Text("second")
	h.event(t, "Ev2", slacktest.DM("D1", owner, "next", "100.2"))
	h.fake.WaitCalls(t, "chat.postMessage", 2)
	if n, d := len(audio.Transcriptions()), h.fake.Downloads(); n != 1 || d != 1 {
		t.Fatalf("%d transcriptions, %d downloads after a retry, want 1 and 1", n, d)
	}
}

// A recording longer than voice.max_seconds by Slack's stated length is
// refused before it is downloaded.
func TestSlackAudioOverTheLimitIsRefusedBeforeDownload(t *testing.T) {
	o, audio := voiceOptions(t, func(c *voice.Config) { c.MaxSeconds = 60 })
	h := start(t, o)
	h.event(t, "Ev1", h.fake.DMWithFile("D1", owner, "", "100.1", slacktest.File{Name: "talk.mp3", MIME: "audio/mpeg",
		Content: voicetest.Note(t), Seconds: 125}))
	calls := h.fake.WaitCalls(t, "chat.postMessage", 1)
	if got := calls[0].Params["text"]; !strings.Contains(got, "2:05 minutes long; I listen to notes up to 1 minute") {
		t.Fatalf("answered %q", got)
	}
	if h.fake.Downloads() != 0 || len(audio.Transcriptions()) != 0 {
		t.Fatalf("%d downloads, %d transcriptions", h.fake.Downloads(), len(audio.Transcriptions()))
	}
}
