package telegram

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

const heard = "Remind me to call the dentist tomorrow at nine."

// voiced is a harness whose adapter hears voice notes through a fake
// audio service, keeping them in a workspace.
type voiced struct {
	*harness
	audio *voicetest.Server
	ws    *files.Workspaces
	cfg   voice.Config
}

func newVoiced(t *testing.T, mut func(*voice.Config)) *voiced {
	h := newHarness(t, storetest.Options{})
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	v := &voiced{harness: h, audio: voicetest.New(t, heard), ws: ws}
	v.cfg = voice.Config{TranscriptionModel: "whisper-1", BaseURL: v.audio.URL, APIKey: v.audio.Key, Language: "en"}
	if mut != nil {
		mut(&v.cfg)
	}
	v.cfg = v.cfg.WithDefaults("", "")
	return v
}

func (v *voiced) config(mut func(*Config)) Config {
	svc := voice.New(v.cfg, voice.Options{Workspace: v.ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	return v.harness.config(func(c *Config) {
		c.Files, c.Voice = v.ws, svc
		if mut != nil {
			mut(c)
		}
	})
}

func (v *voiced) pushNote() int {
	return v.tg.Push(telegramtest.Message{From: ana, Voice: &telegramtest.File{MIME: "audio/ogg", Content: voicetest.Note(v.t)}, Seconds: 3})
}

// A voice note is downloaded through getFile and the file URL, kept in
// the chat's workspace, transcribed once through /audio/transcriptions
// (the model, the file's name and the language hint in the multipart
// request), and answered as the person's message marked as spoken; with
// voice.reply when_spoken the answer goes out as text and as a voice
// message made by /audio/speech.
func TestVoiceNoteIsHeardAndAnsweredAloud(t *testing.T) {
	v := newVoiced(t, func(c *voice.Config) { c.Reply = voice.ReplyWhenSpoken })
	v.env.Model.Text("I'll remind you at **9:00** tomorrow.")
	v.start(v.env, v.config(nil))
	name := fmt.Sprintf("voice-ufile-%d.ogg", v.pushNote())
	sent := v.tg.WaitSent(t, 1)
	if sent[0].Text != "I&#39;ll remind you at <b>9:00</b> tomorrow." {
		t.Fatalf("the text answer is %q", sent[0].Text)
	}
	tr := v.audio.Transcriptions()
	if len(tr) != 1 || tr[0].Model != "whisper-1" || tr[0].Language != "en" || tr[0].FileName != name ||
		!bytes.Equal(tr[0].Audio, voicetest.Note(t)) {
		t.Fatalf("transcriptions: %d, first %+v", len(tr), tr[0].FileName)
	}
	last := v.env.Model.Last(t).Messages
	want := "(voice message) " + heard + "\n[The voice note's audio is kept in this chat's workspace as " + name + ".]"
	if got := last[len(last)-1].Content; got != want {
		t.Fatalf("the model read %q, want %q", got, want)
	}
	if kept, err := os.ReadFile(filepath.Join(v.ws.Dir("telegram:42"), name)); err != nil || !bytes.Equal(kept, voicetest.Note(t)) {
		t.Fatalf("the workspace holds %d bytes (%v)", len(kept), err)
	}
	v.tg.WaitFor(t, "the voice answer", func() bool { return len(v.tg.Uploads()) == 1 })
	up := v.tg.Uploads()[0]
	if up.Method != "sendVoice" || up.ChatID != "42" || !bytes.Equal(up.Content, v.audio.Audio()) {
		t.Fatalf("the voice answer went as %s to %s with %d bytes", up.Method, up.ChatID, len(up.Content))
	}
	sp := v.audio.Speeches()
	if len(sp) != 1 || sp[0].Input != "I'll remind you at 9:00 tomorrow." || sp[0].Format != "opus" || sp[0].Model != "tts-1" || sp[0].Voice != "alloy" {
		t.Fatalf("speech requests %+v", sp)
	}
	// A typed message is answered in text only.
	typed := v.tg.Push(telegramtest.Message{From: ana, Text: "thanks"})
	v.tg.WaitSent(t, 2)
	chattest.Eventually(t, "the typed answer's event done", func() bool { return itemState(v.env, typed) == "done" })
	if n := len(v.tg.Uploads()); n != 1 {
		t.Fatalf("%d voice answers after a typed message, want 1", n)
	}
}

// The process stops after the note was transcribed and before the
// model answered; after the restart the note is answered from the stored
// transcript: one transcription in all.
func TestVoiceNoteIsTranscribedOnceAcrossACrash(t *testing.T) {
	v := newVoiced(t, nil)
	v.env.Model.Push(chattest.Step{Text: "never delivered", Delay: time.Minute})
	id := v.pushNote()
	_, stop := v.start(v.env, v.config(hardStop))
	chattest.Eventually(t, "the turn to start", func() bool { return len(v.env.Model.Requests()) == 1 })
	stop()
	if state := itemState(v.env, id); state != "pending" {
		t.Fatalf("inbox state %q after the crash, want pending", state)
	}
	v.env.Model.Text("Noted.")
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: v.env.DBPath, Model: v.env.Model})
	v.start(env2, v.config(nil))
	sent := v.tg.WaitSent(t, 1)
	if sent[0].Text != "Noted." {
		t.Fatalf("answered %q", sent[0].Text)
	}
	if n := len(v.audio.Transcriptions()); n != 1 {
		t.Fatalf("%d transcriptions, want 1", n)
	}
	if n := userMessages(env2, fmt.Sprintf("(voice message) %s\n[The voice note's audio is kept in this chat's workspace as voice-ufile-%d.ogg.]", heard, id)); n != 1 {
		t.Fatalf("the transcript is in the history %d times, want 1", n)
	}
	if n := len(v.tg.Calls("getFile")); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
}

// A note longer or larger than the limits, by what Telegram states, is
// refused with a plain sentence before anything is downloaded.
func TestVoiceNoteOverTheLimitsIsRefusedBeforeDownload(t *testing.T) {
	v := newVoiced(t, func(c *voice.Config) { c.MaxSeconds = 2 })
	v.start(v.env, v.config(nil))
	v.pushNote()
	sent := v.tg.WaitSent(t, 1)
	if !strings.Contains(sent[0].Text, "3 seconds long; I listen to notes up to 2 seconds") {
		t.Fatalf("answered %q", sent[0].Text)
	}
	v2 := newVoiced(t, func(c *voice.Config) { c.MaxBytes = 1000 })
	v2.start(v2.env, v2.config(nil))
	v2.pushNote()
	sent = v2.tg.WaitSent(t, 1)
	if !strings.Contains(sent[0].Text, "your voice note is 7.2 KB; I take notes up to 1000 bytes") {
		t.Fatalf("answered %q", sent[0].Text)
	}
	for _, h := range []*voiced{v, v2} {
		if n := len(h.tg.Calls("getFile")); n != 0 || len(h.audio.Transcriptions()) != 0 || len(h.env.Model.Requests()) != 0 {
			t.Fatalf("%d downloads, %d transcriptions, %d model requests for a refused note", n, len(h.audio.Transcriptions()), len(h.env.Model.Requests()))
		}
	}
}

// Without voice set up, a chat is told once; the next note is not
// answered again, and the operator's log names the key to set.
func TestVoiceNotSetUpIsSaidOncePerChat(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.start(h.env, h.config(nil))
	note := telegramtest.Message{From: ana, Voice: &telegramtest.File{MIME: "audio/ogg", Content: []byte("OggS")}, Seconds: 1}
	h.tg.Push(note)
	sent := h.tg.WaitSent(t, 1)
	if html.UnescapeString(sent[0].Text) != bridge.TextVoiceOff {
		t.Fatalf("answered %q", sent[0].Text)
	}
	second := h.tg.Push(note)
	h.tg.WaitFor(t, "the second note confirmed", func() bool { return h.tg.Confirmed(second) })
	h.tg.Push(telegramtest.Message{From: ana, Text: "ok, typing"})
	h.tg.WaitSent(t, 2)
	if sent := h.tg.Sent(); len(sent) != 2 || html.UnescapeString(sent[1].Text) == bridge.TextVoiceOff {
		t.Fatalf("sent %+v", sent)
	}
	if !strings.Contains(h.logs.String(), "voice.transcription_model") {
		t.Errorf("the log does not name the key:\n%s", h.logs)
	}
	if n := len(h.tg.Calls("getFile")); n != 0 {
		t.Errorf("%d downloads without voice", n)
	}
}

// A transcription that fails (after its tries) is a plain sentence; the
// audio stays in the workspace and the model is not asked.
func TestVoiceNoteThatCannotBeHeardIsKept(t *testing.T) {
	v := newVoiced(t, nil)
	v.audio.Fail(500, 500, 500)
	v.start(v.env, v.config(nil))
	name := fmt.Sprintf("voice-ufile-%d.ogg", v.pushNote())
	sent := v.tg.WaitSent(t, 1)
	if got := html.UnescapeString(sent[0].Text); got != fmt.Sprintf(bridge.TextVoiceUnheard, name) {
		t.Fatalf("answered %q", got)
	}
	if _, err := os.Stat(filepath.Join(v.ws.Dir("telegram:42"), name)); err != nil {
		t.Fatal(err)
	}
	if n := len(v.audio.Transcriptions()); n != 3 {
		t.Errorf("%d tries, want 3", n)
	}
	if n := len(v.env.Model.Requests()); n != 0 {
		t.Errorf("%d model requests", n)
	}
}

// Speech that fails leaves the text answer, which goes out.
func TestSpeechFailureStillSendsTheText(t *testing.T) {
	v := newVoiced(t, func(c *voice.Config) { c.Reply = voice.ReplyAlways })
	v.audio.FailSpeech(400)
	v.env.Model.Text("Here you are.")
	v.start(v.env, v.config(nil))
	id := v.tg.Push(telegramtest.Message{From: ana, Text: "hi"})
	v.tg.WaitSent(t, 1)
	chattest.Eventually(t, "the event done", func() bool { return itemState(v.env, id) == "done" })
	if len(v.tg.Uploads()) != 0 || len(v.audio.Speeches()) != 1 {
		t.Fatalf("%d uploads, %d speech requests", len(v.tg.Uploads()), len(v.audio.Speeches()))
	}
}

// With voice.echo the transcript goes back first, in quotes; without
// voice.keep_audio the audio is deleted once the transcript is stored.
func TestVoiceEchoAndAudioNotKept(t *testing.T) {
	off := false
	v := newVoiced(t, func(c *voice.Config) { c.Echo, c.KeepAudio = true, &off })
	v.env.Model.Text("Sure.")
	v.start(v.env, v.config(nil))
	v.tg.Push(telegramtest.Message{From: ana, Voice: &telegramtest.File{MIME: "audio/ogg", Content: voicetest.Note(t)}, Seconds: 3, Text: "from the car"})
	sent := v.tg.WaitSent(t, 2)
	if sent[0].Text != "“"+heard+"”" || sent[1].Text != "Sure." {
		t.Fatalf("sent %q, %q", sent[0].Text, sent[1].Text)
	}
	last := v.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; got != "(voice message) "+heard+"\nfrom the car" {
		t.Fatalf("the model read %q", got)
	}
	if entries, _ := os.ReadDir(v.ws.Dir("telegram:42")); len(entries) != 0 {
		t.Fatalf("the workspace keeps %d files", len(entries))
	}
}

// A stranger's voice note is refused like their text: nothing is
// downloaded or transcribed, so nobody outside the allowlist costs the
// owner a transcription.
func TestVoiceNoteFromAStrangerIsNotDownloaded(t *testing.T) {
	v := newVoiced(t, nil)
	v.start(v.env, v.config(nil))
	v.tg.Push(telegramtest.Message{From: mallory, Voice: &telegramtest.File{MIME: "audio/ogg", Content: voicetest.Note(t)}, Seconds: 3})
	sent := v.tg.WaitSent(t, 1)
	if html.UnescapeString(sent[0].Text) != bridge.TextRefused {
		t.Fatalf("answered %q", sent[0].Text)
	}
	if n := len(v.tg.Calls("getFile")); n != 0 || len(v.audio.Transcriptions()) != 0 {
		t.Fatalf("%d downloads, %d transcriptions for a stranger", n, len(v.audio.Transcriptions()))
	}
}

// The spoken answer is a part of the reply like the text's: the process
// stops while it is on its way; after the restart it goes out, once, and
// the text already sent is not sent again.
func TestSpokenAnswerIsAPartSentOnce(t *testing.T) {
	v := newVoiced(t, func(c *voice.Config) { c.Reply = voice.ReplyAlways })
	v.env.Model.Text("Hello.")
	v.tg.Pause("sendVoice")
	_, stop := v.start(v.env, v.config(hardStop))
	id := v.tg.Push(telegramtest.Message{From: ana, Text: "hi"})
	v.tg.WaitSent(t, 1)
	v.tg.WaitFor(t, "the spoken answer on its way", func() bool { return v.tg.Waiting("sendVoice") == 1 })
	stop()
	if state := itemState(v.env, id); state != "answered" {
		t.Fatalf("inbox state %q after the stop, want answered", state)
	}
	v.tg.WaitFor(t, "the cut upload to end", func() bool { return v.tg.Waiting("sendVoice") == 0 })
	v.tg.Resume("sendVoice")
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: v.env.DBPath, Model: v.env.Model})
	v.start(env2, v.config(nil))
	v.tg.WaitFor(t, "the spoken answer", func() bool { return len(v.tg.Uploads()) == 1 })
	chattest.Eventually(t, "the event done", func() bool { return itemState(env2, id) == "done" })
	if sent := v.tg.Sent(); len(sent) != 1 || len(v.tg.Uploads()) != 1 {
		t.Fatalf("%d texts and %d voice messages, want 1 and 1", len(sent), len(v.tg.Uploads()))
	}
}

// Answers spoken always, but no transcription model: a voice note is
// told that voice notes are not set up, not sent to be transcribed.
func TestSpeakingOnlyDoesNotHear(t *testing.T) {
	v := newVoiced(t, func(c *voice.Config) { c.TranscriptionModel, c.Reply = "", voice.ReplyAlways })
	v.start(v.env, v.config(nil))
	v.pushNote()
	if got := html.UnescapeString(v.tg.WaitSent(t, 1)[0].Text); got != bridge.TextVoiceOff {
		t.Fatalf("answered %q", got)
	}
	if n := len(v.tg.Calls("getFile")); n != 0 || len(v.audio.Transcriptions()) != 0 {
		t.Fatalf("%d downloads, %d transcriptions", n, len(v.audio.Transcriptions()))
	}
}

// An audio file and a round video note are heard like a voice note, kept
// under their own names.
func TestAudioAndVideoNotesAreHeard(t *testing.T) {
	v := newVoiced(t, nil)
	v.start(v.env, v.config(nil))
	v.tg.Push(telegramtest.Message{From: ana, Audio: &telegramtest.File{Name: "memo.mp3", MIME: "audio/mpeg", Content: voicetest.Note(t)}, Seconds: 3})
	v.tg.WaitSent(t, 1)
	id := v.tg.Push(telegramtest.Message{From: ana, VideoNote: &telegramtest.File{Content: voicetest.Note(t)}, Seconds: 3})
	v.tg.WaitSent(t, 2)
	tr := v.audio.Transcriptions()
	if len(tr) != 2 || tr[0].FileName != "memo.mp3" || tr[1].FileName != fmt.Sprintf("video-note-ufile-%d.mp4", id) {
		t.Fatalf("transcriptions %d: %q", len(tr), []string{tr[0].FileName})
	}
	for _, r := range v.env.Model.Requests() {
		if last := r.Messages[len(r.Messages)-1].Content; !strings.HasPrefix(last, "(voice message) "+heard) {
			t.Fatalf("the model read %q", last)
		}
	}
}

// /voice FILE reads a path on the machine: it is the console's own, for
// the operator at the terminal. Typed in a chat it is no command, and no
// file of the server is copied or heard.
func TestVoiceFileIsTheConsolesAlone(t *testing.T) {
	v := newVoiced(t, nil)
	v.start(v.env, v.config(nil))
	v.tg.Push(telegramtest.Message{From: ana, Text: "/voice /etc/hostname"})
	if got := html.UnescapeString(v.tg.WaitSent(t, 1)[0].Text); !strings.Contains(got, "I don't know the command /voice") {
		t.Fatalf("answered %q", got)
	}
	if entries, _ := os.ReadDir(v.ws.Dir("telegram:42")); len(entries) != 0 || len(v.audio.Transcriptions()) != 0 {
		t.Fatalf("%d files kept, %d transcriptions", len(entries), len(v.audio.Transcriptions()))
	}
}
