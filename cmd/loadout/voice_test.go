package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/settings"
	"loadout/voice/voicetest"
)

// The voice section, as an operator writes it, hears a Telegram voice
// note through its own audio server, answers it aloud, and shows what
// it cost in /status and at /metrics.
func TestVoiceSectionHearsAndCounts(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	audio := voicetest.New(t, "what is the weather")
	model.Text("Sunny all day.")
	addr, stop := serveTelegram(t, tg, model, "voice:\n  transcription_model: whisper-1\n  base_url: "+audio.URL+
		"\n  api_key: "+audio.Key+"\n  reply: when_spoken\n")
	defer stop()
	ana := telegramtest.User{ID: 42, UserName: "ana"}
	tg.Push(telegramtest.Message{From: ana, Voice: &telegramtest.File{MIME: "audio/ogg", Content: voicetest.Note(t)}, Seconds: 3})
	if sent := tg.WaitSent(t, 1); sent[0].Text != "Sunny all day." {
		t.Fatalf("answered %q", sent[0].Text)
	}
	tg.WaitFor(t, "the spoken answer", func() bool { return len(tg.Uploads()) == 1 })
	if up := tg.Uploads()[0]; up.Method != "sendVoice" {
		t.Fatalf("the spoken answer went by %s", up.Method)
	}
	last := model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.HasPrefix(got, "(voice message) what is the weather") {
		t.Fatalf("the model read %q", got)
	}
	tg.Push(telegramtest.Message{From: ana, Text: "/status"})
	sent := tg.WaitSent(t, 2)
	if !strings.Contains(sent[1].Text, "Voice: 1 note heard (3s), 14 characters spoken") {
		t.Fatalf("/status says %q", sent[1].Text)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`loadout_voice_transcribed_seconds_total{chat="telegram:42"} 3`, `loadout_voice_spoken_characters_total{chat="telegram:42"} 14`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A bad voice key is refused at start, naming it.
func TestVoiceConfigErrorsNameTheKey(t *testing.T) {
	for in, key := range map[string]string{
		"voice:\n  reply: loud\n":                                 "voice.reply",
		"voice:\n  transcription_model: w\n  base_url: nope\n":    "voice.base_url",
		"voice:\n  transcription_model: w\n  keep_audio: maybe\n": "voice.keep_audio",
	} {
		if _, err := settings.Parse([]byte(in), env(nil)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", in, err, key)
		}
	}
	cfg, err := settings.Parse(nil, env(map[string]string{"LOADOUT_VOICE_KEEP_AUDIO": "false", "LOADOUT_VOICE_MAX_BYTES": "1000"}))
	if err != nil || cfg.Voice.KeepAudio == nil || *cfg.Voice.KeepAudio || cfg.Voice.MaxBytes != 1000 {
		t.Fatalf("from the environment: %+v, %v", cfg.Voice, err)
	}
}
