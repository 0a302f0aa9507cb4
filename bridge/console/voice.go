package console

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"loadout/bridge"
)

// audioExts are the files a path typed alone is heard as.
var audioExts = map[string]bool{".ogg": true, ".oga": true, ".opus": true, ".mp3": true, ".m4a": true,
	".wav": true, ".webm": true, ".flac": true, ".mp4": true, ".mpga": true, ".mpeg": true}

// voiceFile reports the audio file a line names: "/voice FILE", or a
// line that is only the path of an audio file that exists.
func voiceFile(line string) (string, bool) {
	if name, args, ok := bridge.ParseCommand(line); ok {
		return args, name == "voice"
	}
	p := strings.Trim(strings.TrimSpace(line), `"'`)
	if p == "" || strings.ContainsAny(p, "\n") || !audioExts[strings.ToLower(filepath.Ext(p))] {
		return "", false
	}
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	return p, true
}

// takeVoice copies a local audio file into the console chat's workspace
// as a voice note, or returns the sentence that says why it cannot be.
func (c *Console) takeVoice(ctx context.Context, path string) (*bridge.VoiceNote, string) {
	path = strings.Trim(strings.TrimSpace(path), `"'`)
	if path == "" {
		return nil, "Usage: /voice FILE — the path of an audio file (OGG/Opus, MP3, M4A, WAV…) to hear as a voice note."
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Sprintf("I can't open %s: %v", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Sprintf("%s is not a file I can read.", path)
	}
	reply, ok := c.pipe.VoiceRefusal(c.ChatKey(), st.Size(), 0)
	switch {
	case !ok:
		return nil, "Voice notes are not set up here (voice.transcription_model)."
	case reply != "":
		return nil, reply
	case c.cfg.Files == nil:
		return nil, bridge.TextVoiceNotKept
	}
	saved, _, err := c.cfg.Files.Save(ctx, c.ChatKey(), filepath.Base(path), f)
	if err != nil {
		return nil, fmt.Sprintf(bridge.TextVoiceNotSaved, err)
	}
	return &bridge.VoiceNote{File: saved}, ""
}

// SendVoice keeps a spoken answer in the console chat's workspace and
// prints where, so it can be played.
func (c *Console) SendVoice(ctx context.Context, _ any, audio []byte) error {
	if c.cfg.Files == nil {
		return nil
	}
	saved, n, err := c.cfg.Files.Save(ctx, c.ChatKey(), "spoken-answer.ogg", bytes.NewReader(audio))
	if err != nil {
		return err
	}
	return c.Send(ctx, nil, fmt.Sprintf("[spoken answer: %s in this chat's files, %d bytes]", saved, n))
}
