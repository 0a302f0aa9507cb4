package voice_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/config"
	"loadout/store"
	"loadout/tools/files"
	"loadout/tools/files/filestest"
	"loadout/voice"
	"loadout/voice/voicetest"
)

type meter struct {
	mu             sync.Mutex
	seconds, chars map[string]int
}

func (m *meter) Transcribed(chat string, s int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seconds[chat] += s
}

func (m *meter) Spoken(chat string, c int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.chars[chat] += c
}

type fixture struct {
	svc   *voice.Service
	audio *voicetest.Server
	ws    *files.Workspaces
	db    *store.DB
	meter *meter
}

func newFixture(t *testing.T, mut func(*voice.Config)) fixture {
	t.Helper()
	audio := voicetest.New(t, "  hello there  ")
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Language: "de"}
	if mut != nil {
		mut(&cfg)
	}
	m := &meter{seconds: map[string]int{}, chars: map[string]int{}}
	svc := voice.New(cfg.WithDefaults("", ""), voice.Options{Workspace: ws, Usage: db, Meter: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	return fixture{svc: svc, audio: audio, ws: ws, db: db, meter: m}
}

func (f fixture) keep(t *testing.T, chat, name string) bridge.VoiceNote {
	t.Helper()
	saved, _, err := f.ws.Save(context.Background(), chat, name, strings.NewReader(string(voicetest.Note(t))))
	if err != nil {
		t.Fatal(err)
	}
	return bridge.VoiceNote{File: saved}
}

// A note goes out as go-openai's multipart request (model, language,
// the file under its name) and its transcript comes back trimmed; its
// length — stated, or read from the OGG file — is counted for the chat
// in the store and the meter.
func TestTranscribeCountsWhatItCosts(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	note := f.keep(t, "telegram:1", "n.ogg")
	text, err := f.svc.Transcribe(ctx, "telegram:1", note)
	if err != nil || text != "hello there" {
		t.Fatalf("Transcribe = %q, %v", text, err)
	}
	tr := f.audio.Transcriptions()
	if len(tr) != 1 || tr[0].Model != "whisper-1" || tr[0].Language != "de" || tr[0].FileName != "n.ogg" {
		t.Fatalf("requests %+v", tr)
	}
	note.Seconds = 40 // stated by the platform
	if _, err := f.svc.Transcribe(ctx, "telegram:1", note); err != nil {
		t.Fatal(err)
	}
	u, err := f.db.VoiceUsage(ctx, "telegram:1")
	if err != nil || u.Notes != 2 || u.Seconds != 3+40 {
		t.Fatalf("usage %+v (%v), want 2 notes of 3 s (read from the file) and 40 s", u, err)
	}
	if f.meter.seconds["telegram:1"] != 43 {
		t.Fatalf("metered %v", f.meter.seconds)
	}
}

// A server error is tried again; a refusal is not.
func TestTranscribeRetriesOnlyWhatMayPass(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	note := f.keep(t, "c", "n.ogg")
	f.audio.Fail(503)
	if _, err := f.svc.Transcribe(ctx, "c", note); err != nil {
		t.Fatal(err)
	}
	if n := len(f.audio.Transcriptions()); n != 2 {
		t.Fatalf("%d tries after a 503, want 2", n)
	}
	f.audio.Fail(400)
	if _, err := f.svc.Transcribe(ctx, "c", note); err == nil || !strings.Contains(err.Error(), "transcription") {
		t.Fatalf("a 400 gave %v", err)
	}
	if n := len(f.audio.Transcriptions()); n != 3 {
		t.Fatalf("%d tries in all, want 3 (a 400 is not tried again)", n)
	}
	if _, err := f.svc.Transcribe(ctx, "c", bridge.VoiceNote{File: "../other/x.ogg"}); err == nil {
		t.Fatal("a file outside the chat's workspace was sent")
	}
}

// An answer is read without its Markdown marks or link targets, cut at a
// sentence within voice.speak_chars with a word that the rest is
// written; the audio is OGG/Opus, and its characters are counted.
func TestSpeakReadsAPlainShortVersion(t *testing.T) {
	f := newFixture(t, func(c *voice.Config) { c.SpeakChars = 50; c.SpeechVoice = "nova" })
	ctx := context.Background()
	answer := "## Plan\n**Call** the [dentist](https://example.org/d) at `9:00`. Then buy milk, eggs, bread and a very long list of other things."
	audio, err := f.svc.Speak(ctx, "c", answer)
	if err != nil || len(audio) == 0 {
		t.Fatalf("Speak: %d bytes, %v", len(audio), err)
	}
	sp := f.audio.Speeches()
	want := "Plan\nCall the dentist at 9:00. The rest is in my written answer."
	if len(sp) != 1 || sp[0].Input != want || sp[0].Format != "opus" || sp[0].Voice != "nova" {
		t.Fatalf("speech requests %+v, want input %q", sp, want)
	}
	if u, _ := f.db.VoiceUsage(ctx, "c"); u.Chars != len([]rune(want)) || u.Notes != 0 {
		t.Fatalf("usage %+v", u)
	}
	f.audio.FailSpeech(400)
	if _, err := f.svc.Speak(ctx, "c", "hi"); err == nil {
		t.Fatal("a refused speech request gave no error")
	}
}

// Without voice.keep_audio the audio is deleted once heard; with it
// (the default) it stays.
func TestHeardKeepsTheAudioUnlessToldNot(t *testing.T) {
	for _, keep := range []bool{true, false} {
		f := newFixture(t, func(c *voice.Config) { c.KeepAudio = &keep })
		note := f.keep(t, "c", "n.ogg")
		f.svc.Heard("c", note)
		_, err := os.Stat(filepath.Join(f.ws.Dir("c"), "n.ogg"))
		if kept := err == nil; kept != keep || f.svc.KeepsAudio() != keep {
			t.Fatalf("keep_audio %v: the file is kept: %v", keep, kept)
		}
	}
}

func TestCheckNamesTheKey(t *testing.T) {
	for _, c := range []struct {
		cfg  voice.Config
		want string
	}{
		{voice.Config{Reply: "sometimes"}, "voice.reply: must be never, when_spoken or always"},
		{voice.Config{Reply: "when_spoken"}, "voice.reply: when_spoken needs voice.transcription_model"},
		{voice.Config{TranscriptionModel: "w", BaseURL: "ftp://x"}, "voice.base_url"},
		{voice.Config{TranscriptionModel: "w", MaxBytes: -1}, "voice.max_bytes"},
		{voice.Config{TranscriptionModel: "w", Language: "English"}, "voice.language"},
		{voice.Config{TranscriptionModel: "w", SpeakChars: -5}, "voice.speak_chars"},
	} {
		ch := &config.Checker{Section: "voice"}
		c.cfg.Check(ch)
		errs := ch.Errors()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, errs, c.want)
		}
	}
	ch := &config.Checker{Section: "voice"}
	voice.Config{TranscriptionModel: "whisper-1", Reply: "always", Language: "en"}.Check(ch)
	if errs := ch.Errors(); len(errs) != 0 {
		t.Errorf("a good section: %v", errs)
	}
}

// The text read aloud is made in one pass: a long answer costs linear
// time whatever it holds.
func BenchmarkSpeakable(b *testing.B) {
	text := strings.Repeat("**bold** [link](https://x.example/y) `code` # not a heading ", 20000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		voice.Speakable(text, 1500)
	}
}

// Link marks without their closing bracket, many to a line, still cost
// linear time.
func BenchmarkSpeakableUnclosedLinks(b *testing.B) {
	text := strings.Repeat("](", 200000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		voice.Speakable(text, 1500)
	}
}

// Found by review: a note was checked through os.Root, then opened
// again by its path, so a link put in its place in between sent a file
// from outside the workspace to the transcription service. The file
// checked is the file sent.
func TestTranscribeSendsTheFileChecked(t *testing.T) {
	f := newFixture(t, nil)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("another chat's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	note := f.keep(t, "c", "n.ogg")
	audio := voicetest.New(t, "heard")
	svc := voice.New(voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key}.WithDefaults("", ""),
		voice.Options{Workspace: filestest.Swapping{Workspaces: f.ws, Dir: f.ws.Dir("c"), Outside: outside}, Usage: f.db, Meter: f.meter,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if _, err := svc.Transcribe(context.Background(), "c", note); err != nil {
		t.Fatal(err)
	}
	for _, tr := range audio.Transcriptions() {
		if strings.Contains(string(tr.Audio), "secret") || string(tr.Audio) != string(voicetest.Note(t)) {
			t.Errorf("sent %q", tr.Audio)
		}
	}
}
