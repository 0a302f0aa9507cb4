package telegram

import (
	"bytes"
	"context"
	"io"
	"strconv"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge"
)

// spoken is the audio of a voice note, an audio file or a round video
// note, as Telegram states it before any download.
type spoken struct {
	id, name string
	size     int
	seconds  int
}

// spokenOf returns the message's voice note, audio or video note; nil
// when it has none.
func spokenOf(m *message) *spoken {
	switch {
	case m.Voice != nil:
		v := m.Voice
		return &spoken{id: v.FileID, name: "voice-" + v.FileUniqueID + ext(v.MimeType, ".ogg"), size: v.FileSize, seconds: v.Duration}
	case m.Audio != nil:
		v := m.Audio
		name := v.FileName
		if name == "" {
			name = "audio-" + v.FileUniqueID + ext(v.MimeType, ".mp3")
		}
		return &spoken{id: v.FileID, name: name, size: v.FileSize, seconds: v.Duration}
	case m.VideoNote != nil:
		v := m.VideoNote
		return &spoken{id: v.FileID, name: "video-note-" + v.FileUniqueID + ".mp4", size: v.FileSize, seconds: v.Duration}
	}
	return nil
}

// ext is the file extension for an audio type.
func ext(mimeType, def string) string {
	switch mimeType {
	case "audio/ogg", "audio/opus":
		return ".ogg"
	case "audio/mpeg", "audio/mp3":
		return ".mp3"
	case "audio/mp4", "audio/x-m4a", "audio/m4a":
		return ".m4a"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/webm":
		return ".webm"
	case "audio/flac":
		return ".flac"
	}
	return def
}

// takeVoice decides about a voice note by what Telegram states of it,
// then downloads it into the chat's workspace: the event the pipeline
// transcribes, or a sentence that answers the person.
func (a *Adapter) takeVoice(ctx context.Context, chatKey string, v *spoken) (note *bridge.VoiceNote, reply string, ok bool) {
	if reply, ok = a.pipe.VoiceRefusal(chatKey, int64(v.size), v.seconds); !ok || reply != "" {
		return nil, reply, ok
	}
	if v.size > maxDownload {
		return nil, "Sorry, your voice note is larger than the 20 MB Telegram lets me download. Please send a shorter one, or type your message.", true
	}
	note, reply = a.pipe.KeepVoice(ctx, a.cfg.Files, chatKey, v.name, v.seconds, maxDownload,
		func(ctx context.Context) (io.ReadCloser, error) { return a.download(ctx, v.id) })
	return note, reply, true
}

// SendVoice sends OGG/Opus audio to the route as a voice message.
func (a *Adapter) SendVoice(ctx context.Context, route any, audio []byte) error {
	r, err := asRoute(route)
	if err != nil {
		return err
	}
	params := tgbotapi.Params{"chat_id": strconv.FormatInt(r.ChatID, 10)}
	if r.ThreadID != 0 {
		params["message_thread_id"] = strconv.Itoa(r.ThreadID)
	}
	if r.ReplyTo != 0 {
		params["reply_to_message_id"] = strconv.Itoa(r.ReplyTo)
		params["allow_sending_without_reply"] = "true"
	}
	return a.policy(callAttempts).Do(ctx, retryable, func(ctx context.Context) error {
		_, err := a.api(ctx).UploadFiles("sendVoice", params, []tgbotapi.RequestFile{{Name: "voice",
			Data: tgbotapi.FileReader{Name: "answer.ogg", Reader: bytes.NewReader(audio)}}})
		return err
	})
}
