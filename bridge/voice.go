package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// VoiceNote is a voice message a person sent. The channel keeps its audio
// in the chat's workspace and hands it to the pipeline, which transcribes
// it once, before the turn, and stores the transcript with the event: a
// resumed or redelivered event is never transcribed again.
type VoiceNote struct {
	// File is the audio's name in the chat's workspace.
	File string `json:"file"`
	// Seconds is the length the platform stated; 0 when it stated none.
	Seconds int `json:"seconds,omitempty"`
	// Transcript is what was heard, once it was.
	Transcript string `json:"transcript,omitempty"`
	// Echoed records that the transcript was sent back (voice.echo).
	Echoed bool `json:"echoed,omitempty"`
}

// Voice is the speech service the pipeline uses (voice.Service is one):
// nil when voice notes are not set up.
type Voice interface {
	// Listens reports whether voice notes are transcribed: false when
	// the service only speaks answers (voice.reply always, without
	// voice.transcription_model).
	Listens() bool
	// Limits are the stated size and length past which a note is
	// refused before it is downloaded.
	Limits() (maxBytes int64, maxSeconds int)
	// Transcribe returns what is said in the note's audio.
	Transcribe(ctx context.Context, chatKey string, note VoiceNote) (string, error)
	// Heard is told once the transcript is stored.
	Heard(chatKey string, note VoiceNote)
	// KeepsAudio reports whether a note's audio stays in the workspace
	// once heard.
	KeepsAudio() bool
	// Aloud reports whether an answer is spoken too; spoken is whether
	// the person's message was a voice note.
	Aloud(spoken bool) bool
	// Echo reports whether a note's transcript is sent back first.
	Echo() bool
	// Speak returns text read aloud as OGG/Opus audio.
	Speak(ctx context.Context, chatKey, text string) ([]byte, error)
}

// Sentences people see about voice notes.
const (
	// TextVoiceOff answers the first voice note of a chat when voice is
	// not set up.
	TextVoiceOff = "Sorry, voice notes are not set up here, so I can't listen to this one. Please type your message."
	// TextVoiceUnheard answers a note whose transcription failed; %s is
	// where its audio is kept.
	TextVoiceUnheard = "Sorry, I couldn't make out your voice note (the transcription service did not answer). Its audio is kept in this chat's files as %s. Please send it again, or type your message."
	// TextVoiceSilent answers a note in which no words were heard.
	TextVoiceSilent = "I couldn't hear any words in your voice note (its audio is kept as %s). Please try again, or type your message."
)

// spokenText is the message the model reads for a transcribed note: the
// transcript, marked as spoken, where its audio is kept, then what came
// with it (a caption).
func spokenText(v *VoiceNote, caption string, kept bool) string {
	text := "(voice message) " + v.Transcript
	if kept {
		text += "\n[The voice note's audio is kept in this chat's workspace as " + v.File + ".]"
	}
	return strings.TrimSpace(text + "\n" + caption)
}

// echoText is the transcript sent back so the person can check it.
func echoText(v *VoiceNote) string { return "“" + v.Transcript + "”" }

// VoiceRefusal decides about a voice note before it is downloaded, from
// the size and length its platform states (0 when it states none): "" to
// take it, else the sentence that answers the person. When voice is not
// set up, the chat is told once; later notes are ignored (ok false).
func (p *Pipeline) VoiceRefusal(chatKey string, size int64, seconds int) (reply string, ok bool) {
	if p.cfg.Voice == nil || !p.cfg.Voice.Listens() {
		p.mu.Lock()
		told := p.voiceOff[chatKey]
		p.voiceOff[chatKey] = true
		p.mu.Unlock()
		if !told {
			p.log.Warn("a voice note arrived but voice is off: set voice.transcription_model (e.g. whisper-1) to transcribe notes", "channel", p.cfg.Channel, "chat", chatKey)
			return TextVoiceOff, true
		}
		return "", false
	}
	maxBytes, maxSeconds := p.cfg.Voice.Limits()
	switch {
	case maxSeconds > 0 && seconds > maxSeconds:
		return fmt.Sprintf("Sorry, your voice note is %s long; I listen to notes up to %s. Please send a shorter one, or type your message.",
			minutes(seconds), minutes(maxSeconds)), true
	case maxBytes > 0 && size > maxBytes:
		return fmt.Sprintf("Sorry, your voice note is %s; I take notes up to %s. Please send a shorter one, or type your message.",
			humanSize(size), humanSize(maxBytes)), true
	}
	return "", true
}

// KeepVoice keeps a voice note VoiceRefusal took: it downloads it with
// open into the chat's workspace under name, held to voice.max_bytes and
// to platformMax (what the platform lets a bot download) whatever size
// was stated. It returns the note the pipeline transcribes, or the
// sentence that answers the person.
func (p *Pipeline) KeepVoice(ctx context.Context, files FileSaver, chatKey, name string, seconds int, platformMax int64,
	open func(ctx context.Context) (io.ReadCloser, error)) (*VoiceNote, string) {
	if files == nil {
		return nil, TextVoiceNotKept
	}
	limit := platformMax
	if max, _ := p.cfg.Voice.Limits(); max > 0 {
		limit = min(limit, max)
	}
	body, err := open(ctx)
	if err == nil {
		var saved string
		saved, _, err = files.Save(ctx, chatKey, name, Capped(body, limit))
		body.Close()
		if err == nil {
			return &VoiceNote{File: saved, Seconds: seconds}, ""
		}
	}
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Sprintf(TextVoiceNotSaved, err)
	}
	p.log.Warn("delivery: a voice note could not be downloaded and kept", "channel", p.cfg.Channel, "chat", chatKey, "file", name, "err", err)
	return nil, TextVoiceNotDownloaded
}

// minutes renders a length of audio: "45 seconds", "10 minutes", "12:05".
func minutes(s int) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%d seconds", s)
	case s == 60:
		return "1 minute"
	case s%60 == 0:
		return fmt.Sprintf("%d minutes", s/60)
	}
	return fmt.Sprintf("%d:%02d minutes", s/60, s%60)
}

// listen hears the event's voice note before its turn: it transcribes the
// note unless an earlier try stored its transcript, stores it, sends it
// back when voice.echo asks, and makes it the message the turn reads. A
// note that cannot be heard returns the sentence that answers it instead
// of a turn; a store failure returns the error (the event stays pending).
func (p *Pipeline) listen(ctx context.Context, out Outlet, it *Item, route any, log *slog.Logger) (string, error) {
	v := it.Voice
	if v == nil {
		return "", nil
	}
	if p.cfg.Voice == nil || !p.cfg.Voice.Listens() {
		// Stored while voice was set up, and it no longer is.
		return TextVoiceOff, nil
	}
	if v.Transcript == "" {
		text, err := p.cfg.Voice.Transcribe(ctx, it.Inbound.ChatKey, *v)
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case err != nil:
			log.Warn("delivery: a voice note could not be transcribed; the person is told, and its audio kept", "file", v.File, "err", err)
			return fmt.Sprintf(TextVoiceUnheard, v.File), nil
		case text == "":
			return fmt.Sprintf(TextVoiceSilent, v.File), nil
		}
		v.Transcript = text
		if err := p.write(ctx, log, "store the transcript", func(ctx context.Context) error {
			return p.cfg.Inbox.Transcribed(ctx, it.Seq, *v)
		}); err != nil {
			return "", err
		}
		p.cfg.Voice.Heard(it.Inbound.ChatKey, *v)
	}
	if p.cfg.Voice.Echo() && !v.Echoed {
		if err := p.send(ctx, out, route, nil, echoText(v), nil, it.Inbound.UserKey); err != nil && ctx.Err() == nil {
			log.Warn("delivery: could not send a voice note's transcript back (voice.echo)", "err", err)
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		v.Echoed = true
		if err := p.write(ctx, log, "record the transcript sent back", func(ctx context.Context) error {
			return p.cfg.Inbox.Transcribed(ctx, it.Seq, *v)
		}); err != nil {
			return "", err
		}
	}
	it.Inbound.Text = spokenText(v, it.Inbound.Text, p.cfg.Voice.KeepsAudio())
	return "", nil
}

// speak sends the answer read aloud, the reply's last part. Speech that
// fails is logged and skipped: the text went out already. Only an
// interrupted send is an error, so the part is tried after the restart.
func (p *Pipeline) speak(ctx context.Context, out Outlet, it Item, route any, log *slog.Logger) error {
	sp, ok := out.(Speaker)
	if !ok || p.cfg.Voice == nil {
		return nil
	}
	audio, err := p.cfg.Voice.Speak(ctx, it.Inbound.ChatKey, it.Speech)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("delivery: the answer could not be spoken; the text went out", "err", err)
		return nil
	}
	if err := p.pace.wait(ctx, route); err != nil {
		return err
	}
	err = sp.SendVoice(ctx, route, audio)
	if ctx.Err() == nil {
		p.cfg.Observer.Sent(p.cfg.Channel, err == nil)
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("delivery: the platform did not take the spoken answer; the text went out", "err", err)
		return nil
	}
	return err
}

// More sentences about voice notes, which channels send.
const (
	// TextVoiceNotKept answers a note when there is no workspace to keep
	// its audio in.
	TextVoiceNotKept = "Sorry, I can't listen to voice notes here: there is nowhere to keep their audio. Please type your message."
	// TextVoiceNotDownloaded answers a note the platform would not give.
	TextVoiceNotDownloaded = "Sorry, I couldn't download your voice note. Please send it again, or type your message."
	// TextVoiceNotSaved answers a note that could not be kept; %v is why.
	TextVoiceNotSaved = "Sorry, I couldn't keep your voice note: %v. Please type your message."
)

// Capped reads r up to limit bytes and then fails, so a file saver
// stops and removes what it wrote: what arrives is held to a size
// whatever the platform stated.
func Capped(r io.Reader, limit int64) io.Reader { return &capped{r: r, left: limit} }

type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, ErrTooLarge
	}
	return n, err
}

// ErrTooLarge is what a Capped reader fails with.
var ErrTooLarge = errors.New("it is larger than the most I take")
