package discord

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"loadout/bridge/discord/discordtest"
	"loadout/store/storetest"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

const heard = "Remind me to call the dentist tomorrow at nine."

// A voice message recorded in Discord is downloaded from the CDN,
// transcribed once, answered from its transcript, and the answer posted
// as a voice message too; the gateway sending it again transcribes
// nothing again.
func TestVoiceMessageIsHeardAndAnsweredAloud(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	audio := voicetest.New(t, heard)
	cfg := voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Reply: voice.ReplyWhenSpoken}
	svc := voice.New(cfg.WithDefaults("", ""), voice.Options{Workspace: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	r := newRig(t, storetest.Options{}, func(c *Config) { c.Files, c.Voice = ws, svc })
	r.env.Model.Text("I'll remind you.")
	r.env.Model.Text("second")
	dm := r.dc.DM(ana.ID)
	id := r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Voice: true, Attachments: []discordtest.Attachment{
		{Name: "voice-message.ogg", ContentType: "audio/ogg", Content: voicetest.Note(t), Seconds: 3.2}}})
	r.dc.WaitFor(t, "the spoken answer", func() bool { return len(r.dc.Sent(dm)) == 2 })
	if got := r.lastAsked(); !strings.HasPrefix(got, "(voice message) "+heard) {
		t.Fatalf("the model read %q", got)
	}
	if tr := audio.Transcriptions(); len(tr) != 1 || !bytes.Equal(tr[0].Audio, voicetest.Note(t)) {
		t.Fatalf("%d transcriptions", len(tr))
	}
	sent := r.dc.Sent(dm)
	if sent[0].Content != "I'll remind you." {
		t.Fatalf("sent %q", contents(sent))
	}
	spoken := sent[1]
	if spoken.Flags&(1<<13) == 0 || len(spoken.Files) != 1 || !bytes.Equal(spoken.Files[0].Content, audio.Audio()) || spoken.Files[0].Duration <= 0 {
		t.Fatalf("the spoken answer %+v", spoken)
	}
	r.dc.Redispatch(id)
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "next"})
	r.waitSent(dm, 3)
	if n := len(audio.Transcriptions()); n != 1 {
		t.Fatalf("%d transcriptions after the message came again", n)
	}
}

// Without voice set up, the person is told once.
func TestVoiceMessageWithoutVoice(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	dm := r.dc.DM(ana.ID)
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Voice: true, Attachments: []discordtest.Attachment{
		{Name: "voice-message.ogg", ContentType: "audio/ogg", Content: []byte("OggS"), Seconds: 1}}})
	if sent := r.waitSent(dm, 1); !strings.Contains(sent[0].Content, "voice notes are not set up") {
		t.Fatalf("sent %q", contents(sent))
	}
}
