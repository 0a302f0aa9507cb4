package discord

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/bwmarrin/discordgo"

	"loadout/bridge"
)

// spoken is a recording a person sent, as the message states it before
// any download: a voice message, or an audio file.
type spoken struct {
	url, name string
	size      int
	seconds   int
}

// spokenOf returns the message's recording: its attachment when it is a
// voice message (recorded in Discord), or when its only attachment is
// audio; nil otherwise.
func spokenOf(m *discordgo.Message) *spoken {
	if len(m.Attachments) != 1 {
		return nil
	}
	f := m.Attachments[0]
	if m.Flags&discordgo.MessageFlagsIsVoiceMessage == 0 && !strings.HasPrefix(f.ContentType, "audio/") {
		return nil
	}
	name := f.Filename
	if name == "" {
		name = "voice-message-" + f.ID + ".ogg"
	}
	return &spoken{url: f.URL, name: name, size: f.Size, seconds: int(math.Ceil(f.DurationSecs))}
}

// takeVoice decides about a recording by what Discord states of it,
// then downloads it into the chat's workspace: the voice note the
// pipeline transcribes, or the sentence that answers the person.
func (a *Adapter) takeVoice(ctx context.Context, key string, v *spoken) (note *bridge.VoiceNote, reply string, ok bool) {
	if reply, ok = a.pipe.VoiceRefusal(key, int64(v.size), v.seconds); !ok || reply != "" {
		return nil, reply, ok
	}
	note, reply = a.pipe.KeepVoice(ctx, a.cfg.Files, key, v.name, v.seconds, maxDownload,
		func(ctx context.Context) (io.ReadCloser, error) { return a.download(ctx, v.url) })
	return note, reply, true
}

// voiceMessage is a message that is a voice message: no text, one OGG
// attachment described by its length and waveform.
type voiceMessage struct {
	Flags       discordgo.MessageFlags      `json:"flags"`
	Attachments []voiceAttachment           `json:"attachments"`
	Reference   *discordgo.MessageReference `json:"message_reference,omitempty"`
}

type voiceAttachment struct {
	ID       int     `json:"id"`
	Filename string  `json:"filename"`
	Duration float64 `json:"duration_secs"`
	Waveform string  `json:"waveform"`
}

// flatWave is the waveform shown for a spoken answer: an even line.
var flatWave = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{128}, 64))

// SendVoice posts OGG/Opus audio to the route's channel as a voice
// message. A slash command's answer only the person sees has no place
// for one; it is skipped.
func (a *Adapter) SendVoice(ctx context.Context, rt any, audio []byte) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if r.Ephemeral {
		return nil
	}
	payload := voiceMessage{Flags: discordgo.MessageFlagsIsVoiceMessage,
		Attachments: []voiceAttachment{{Filename: "voice-message.ogg", Duration: oggSeconds(audio), Waveform: flatWave}}}
	if r.Reply != "" {
		payload.Reference = &discordgo.MessageReference{MessageID: r.Reply, ChannelID: r.Channel, FailIfNotExists: new(bool)}
	}
	contentType, body, err := discordgo.MultipartBodyWithJSON(payload, []*discordgo.File{{Name: "voice-message.ogg", ContentType: "audio/ogg", Reader: bytes.NewReader(audio)}})
	if err != nil {
		return err
	}
	endpoint := discordgo.EndpointChannelMessages(r.Channel)
	return a.retry(ctx, func(ctx context.Context) error {
		_, err := a.api.RequestRaw(http.MethodPost, endpoint, contentType, body, endpoint, 0, discordgo.WithContext(ctx))
		return err
	})
}

// oggSeconds is the length of OGG/Opus audio: the last page's granule
// position, in 48 kHz samples; 1 when it cannot be read.
func oggSeconds(audio []byte) float64 {
	i := bytes.LastIndex(audio, []byte("OggS"))
	if i < 0 || len(audio) < i+14 {
		return 1
	}
	granule := binary.LittleEndian.Uint64(audio[i+6 : i+14])
	if granule == 0 || granule > 48000*3600*24 {
		return 1
	}
	return float64(granule) / 48000
}
