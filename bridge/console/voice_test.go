package console_test

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

	"loadout/bridge"
	"loadout/bridge/console"
	"loadout/store/storetest"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

// /voice FILE, or a typed path of an audio file, hears a local file
// through the same path a phone's voice note takes: kept in the chat's
// workspace, transcribed, answered from the transcript; the spoken
// answer is kept beside it.
func TestConsoleHearsALocalAudioFile(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Text("First answer.")
	env.Model.Text("Second answer.")
	audio := voicetest.New(t, "what is on my calendar")
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	svc := voice.New(voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Reply: voice.ReplyWhenSpoken}.WithDefaults("", ""),
		voice.Options{Workspace: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	note := filepath.Join(t.TempDir(), "question.ogg")
	if err := os.WriteFile(note, voicetest.Note(t), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c := console.New(console.Config{In: strings.NewReader("/voice " + note + "\n" + note + "\n/voice\n/quit\n"), Out: &out, User: "ana",
		Delivery: bridge.Delivery{Files: ws, Voice: svc}}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"First answer.", "Second answer.", "[spoken answer: spoken-answer.ogg in this chat's files", "Usage: /voice FILE"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	tr := audio.Transcriptions()
	if len(tr) != 2 || tr[0].FileName != "question.ogg" || tr[1].FileName != "question-2.ogg" {
		t.Fatalf("transcriptions %d", len(tr))
	}
	first := env.Model.Requests()[0].Messages
	if text := first[len(first)-1].Content; !strings.HasPrefix(text, "(voice message) what is on my calendar") {
		t.Fatalf("the model read %q", text)
	}
}
