package whatsapp

import (
	"bytes"
	"context"
	"io"

	"loadout/bridge"
)

// takeVoice decides about a voice note or audio file by the size
// WhatsApp states (it states no length), then downloads it into the
// chat's workspace, trying again with backoff: the voice note the
// pipeline transcribes, or the sentence that answers the person.
func (a *Adapter) takeVoice(ctx context.Context, key, msgID string, f *mediaRef) (note *bridge.VoiceNote, reply string, ok bool) {
	var info media
	err := a.downloadPolicy().Do(ctx, final, func(ctx context.Context) error {
		var err error
		info, err = a.api.mediaInfo(ctx, f.ID)
		return err
	})
	if err != nil {
		a.log.Error("whatsapp: a voice note could not be looked up; the person is told", "err", err)
		return nil, bridge.TextVoiceNotDownloaded, true
	}
	if reply, ok = a.pipe.VoiceRefusal(key, int64(info.Size), 0); !ok || reply != "" {
		return nil, reply, ok
	}
	name := f.Filename
	if name == "" {
		name = "voice-" + shortID(msgID) + ".ogg"
	}
	note, reply = a.pipe.KeepVoice(ctx, a.cfg.Files, key, name, 0, a.cfg.maxMedia, func(ctx context.Context) (io.ReadCloser, error) {
		return a.downloadVoice(ctx, info.URL)
	})
	return note, reply, true
}

// shortID is the tail of a message id, enough to tell files apart.
func shortID(id string) string {
	var b []byte
	for i := len(id) - 1; i >= 0 && len(b) < 12; i-- {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b = append(b, c)
		}
	}
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// SendVoice uploads OGG/Opus audio and sends it to the route's person
// as an audio message. Outside the 24-hour window it is skipped: the
// answer's text is held already.
func (a *Adapter) SendVoice(ctx context.Context, rt any, audio []byte) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if open, err := a.open(ctx, r); err != nil || !open {
		return err
	}
	id, err := a.api.upload(ctx, "answer.ogg", "audio/ogg", bytes.NewReader(audio))
	if err != nil {
		return err
	}
	sent, err := a.api.message(ctx, r.To, map[string]any{"type": "audio", "audio": map[string]string{"id": id}})
	if err != nil {
		return err
	}
	a.record(ctx, r.To, sentPart{ID: sent, Try: 1})
	return nil
}
