package signal

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"loadout/bridge/signal/signaltest"
	"loadout/store/storetest"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

const heard = "Remind me to call the dentist tomorrow at nine."

// A voice note (an audio attachment) is read through getAttachment, kept
// in the chat's workspace, transcribed and answered as the person's
// spoken message; with voice.reply when_spoken the answer goes back as a
// voice note too.
func TestVoiceNoteIsHeardAndAnsweredAloud(t *testing.T) {
	audio := voicetest.New(t, heard)
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Reply: voice.ReplyWhenSpoken}.WithDefaults("", "")
	svc := voice.New(cfg, voice.Options{Workspace: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	h := start(t, storetest.Options{}, func(c *Config) { c.Files, c.Voice = ws, svc })
	h.env.Model.Text("I'll remind you.")
	h.fake.Push(signaltest.Message{From: ana, Files: []signaltest.File{{Type: "audio/aac", Content: voicetest.Note(t), Voice: true}}})
	h.fake.WaitFor(t, "the text and the voice answers", func() bool { return len(h.fake.To(ana)) == 2 })
	sent := h.fake.To(ana)
	if sent[0].Text != "I'll remind you." {
		t.Fatalf("the text answer is %q", sent[0].Text)
	}
	if v := sent[1]; !v.VoiceNote || len(v.Files) != 1 || !bytes.Equal(v.Files[0].Content, audio.Audio()) || v.Files[0].Type != "audio/ogg" {
		t.Fatalf("the voice answer is %+v", v)
	}
	last := h.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.HasPrefix(got, "(voice message) "+heard) {
		t.Fatalf("the model read %q", got)
	}
	tr := audio.Transcriptions()
	if len(tr) != 1 || !bytes.Equal(tr[0].Audio, voicetest.Note(t)) || !strings.HasSuffix(tr[0].FileName, ".aac") {
		t.Fatalf("%d transcriptions, the first of %s", len(tr), tr[0].FileName)
	}
}

// Without voice set up, the chat is told once.
func TestVoiceNoteWithoutVoice(t *testing.T) {
	h := start(t, storetest.Options{}, nil)
	h.fake.Push(signaltest.Message{From: ana, Files: []signaltest.File{{Type: "audio/aac", Content: []byte("x"), Voice: true}}})
	h.fake.WaitFor(t, "the answer", func() bool { return len(h.fake.To(ana)) == 1 })
	if got := h.fake.To(ana)[0].Text; !strings.Contains(got, "voice notes are not set up") {
		t.Fatalf("answered %q", got)
	}
}
