package matrix

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"

	"loadout/bridge"
	"loadout/bridge/matrix/matrixtest"
	"loadout/store/storetest"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

const heard = "remind me to call the garage tomorrow at nine"

// A voice message (m.audio marked org.matrix.msc3245.voice) is
// downloaded (decrypted, in an encrypted room), kept in the chat's
// workspace, transcribed once and answered as spoken; with voice.reply
// when_spoken the answer goes out as text and as a voice message of the
// bot's, encrypted where the room is.
func TestVoiceMessageIsHeardAndAnsweredAloud(t *testing.T) {
	encrypted := matrixtest.Encryption()
	w := newWorld(t, encrypted)
	env := storetest.NewEnv(t, storetest.Options{})
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	audio := voicetest.New(t, heard)
	vc := voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Reply: voice.ReplyWhenSpoken}.WithDefaults("", "")
	svc := voice.New(vc, voice.Options{Workspace: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	cfg := w.config(bridge.Delivery{Files: ws, Voice: svc})
	w.start(t, env, cfg)
	env.Model.Text("I'll remind you at 9:00.")

	ana, room := w.people[0], w.rooms[0]
	note := voicetest.Note(t)
	c := &event.MessageEventContent{MsgType: event.MsgAudio, Body: "Voice message", FileName: "voice.ogg",
		Info:         &event.FileInfo{MimeType: "audio/ogg", Size: len(note), Duration: 3000},
		MSC1767Audio: &event.MSC1767Audio{Duration: 3000}, MSC3245Voice: &event.MSC3245Voice{}}
	ctx := context.Background()
	if encrypted {
		f := attachment.NewEncryptedFile()
		res, err := ana.Client.UploadBytes(ctx, f.Encrypt(note), "application/octet-stream")
		if err != nil {
			t.Fatal(err)
		}
		c.File = &event.EncryptedFileInfo{EncryptedFile: *f, URL: res.ContentURI.CUString()}
	} else {
		res, err := ana.Client.UploadBytesWithName(ctx, note, "audio/ogg", "voice.ogg")
		if err != nil {
			t.Fatal(err)
		}
		c.URL = res.ContentURI.CUString()
	}
	ana.Say(t, room, c)
	got := waitTexts(t, ana, room, w.bot, 2)
	if got[0] != "I'll remind you at 9:00." {
		t.Fatalf("answers %q", got)
	}
	last := env.Model.Last(t).Messages
	if text := last[len(last)-1].Content; !strings.HasPrefix(text, "(voice message) "+heard) {
		t.Fatalf("the model read %q", text)
	}
	if tr := audio.Transcriptions(); len(tr) != 1 || !bytes.Equal(tr[0].Audio, note) {
		t.Fatalf("%d transcriptions", len(tr))
	}
	if kept, err := os.ReadFile(filepath.Join(ws.Dir(chatKey(room, "")), "voice.ogg")); err != nil || !bytes.Equal(kept, note) {
		t.Fatalf("the workspace holds %d bytes (%v)", len(kept), err)
	}
	var spoken *event.MessageEventContent
	matrixtest.Eventually(t, "the spoken answer", func() bool {
		for _, e := range ana.Events(room) {
			if m := e.Content.AsMessage(); e.Sender == w.bot && m.MsgType == event.MsgAudio {
				spoken = m
			}
		}
		return spoken != nil
	})
	if spoken.MSC3245Voice == nil || (encrypted && spoken.File == nil) {
		t.Fatalf("the answer is not a voice message (encrypted: %v): %+v", encrypted, spoken)
	}
	data, err := ana.Download(spoken)
	if err != nil || !bytes.Equal(data, audio.Audio()) {
		t.Fatalf("the voice answer holds %d bytes (%v)", len(data), err)
	}
}
