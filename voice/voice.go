// Package voice turns the voice notes people send into text and answers
// into speech, through an OpenAI-compatible audio service
// (/audio/transcriptions and /audio/speech): OpenAI's, or a local server
// that speaks the same API.
//
// The delivery pipeline (bridge) decides when: it transcribes a note once,
// before the turn, and stores the transcript with the event; it speaks an
// answer as one more part of the reply. This package only does the work
// and counts what it costs.
package voice

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/backoff"
	"loadout/bridge"
	"loadout/chat"
	"loadout/chat/openai"
	"loadout/config"
	"loadout/tools"
)

// Reply policies (voice.reply).
const (
	ReplyNever      = "never"
	ReplyWhenSpoken = "when_spoken"
	ReplyAlways     = "always"
)

// Defaults of the voice section.
const (
	DefaultMaxBytes    = 25 << 20
	DefaultMaxSeconds  = 600
	DefaultSpeakChars  = 1500
	DefaultSpeechModel = "tts-1"
	DefaultSpeechVoice = "alloy"
	DefaultTimeout     = 120 * time.Second
)

// maxSpeech bounds the audio a speech request may return.
const maxSpeech = 25 << 20

// Config is the voice section. Voice is off while TranscriptionModel is
// empty.
type Config struct {
	// TranscriptionModel names the speech-to-text model ("whisper-1");
	// empty turns voice off.
	TranscriptionModel string `yaml:"transcription_model"`
	// BaseURL and APIKey default to the llm section's.
	BaseURL string `yaml:"base_url" secret:"url"`
	APIKey  string `yaml:"api_key" secret:"true"`
	// Language is an optional ISO-639-1 hint ("en", "de").
	Language string `yaml:"language"`
	// Echo answers a note first with its transcript, in quotes.
	Echo bool `yaml:"echo"`
	// KeepAudio keeps the note's audio in the chat's workspace (default
	// true); false deletes it once transcribed.
	KeepAudio *bool `yaml:"keep_audio"`
	// MaxBytes and MaxSeconds refuse a note, by the size and length its
	// platform states, before it is downloaded.
	MaxBytes   int64 `yaml:"max_bytes"`
	MaxSeconds int   `yaml:"max_seconds"`
	// Reply is when answers are spoken too: never (default),
	// when_spoken (a voice note's answer) or always.
	Reply       string `yaml:"reply"`
	SpeechModel string `yaml:"speech_model"`
	SpeechVoice string `yaml:"speech_voice"`
	// SpeakChars is the most of an answer read aloud; a longer one says
	// that the rest is in the text.
	SpeakChars int `yaml:"speak_chars"`
	// Timeout bounds one request to the audio service.
	Timeout time.Duration `yaml:"timeout"`
}

// Enabled reports whether voice notes are transcribed.
func (c Config) Enabled() bool { return strings.TrimSpace(c.TranscriptionModel) != "" }

// WithDefaults fills what is left out. base and key are the llm
// section's, used when the voice section names no service of its own.
func (c Config) WithDefaults(base, key string) Config {
	if c.BaseURL == "" {
		c.BaseURL, c.APIKey = base, cmp.Or(c.APIKey, key)
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxSeconds == 0 {
		c.MaxSeconds = DefaultMaxSeconds
	}
	if c.Reply == "" {
		c.Reply = ReplyNever
	}
	if c.SpeechModel == "" {
		c.SpeechModel = DefaultSpeechModel
	}
	if c.SpeechVoice == "" {
		c.SpeechVoice = DefaultSpeechVoice
	}
	if c.SpeakChars == 0 {
		c.SpeakChars = DefaultSpeakChars
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.KeepAudio == nil {
		keep := true
		c.KeepAudio = &keep
	}
	return c
}

// Check checks the voice section.
func (c Config) Check(ch *config.Checker) {
	switch c.Reply {
	case "", ReplyNever, ReplyWhenSpoken, ReplyAlways:
	default:
		ch.Bad("reply", "must be never, when_spoken or always, got %q", c.Reply)
	}
	if c.Reply == ReplyWhenSpoken && !c.Enabled() {
		ch.Bad("reply", "when_spoken needs voice.transcription_model: no voice note is heard without it")
	}
	ch.URL("base_url", c.BaseURL)
	for _, k := range []struct {
		key string
		v   int64
	}{{"max_bytes", c.MaxBytes}, {"max_seconds", int64(c.MaxSeconds)}, {"speak_chars", int64(c.SpeakChars)}, {"timeout", int64(c.Timeout)}} {
		if k.v < 0 {
			ch.Bad(k.key, "must not be negative")
		}
	}
	if l := c.Language; l != "" && (len(l) < 2 || len(l) > 3 || strings.IndexFunc(l, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0) {
		ch.Bad("language", "must be an ISO-639-1 code like en or de, got %q", l)
	}
}

// Workspace finds a chat's files (files.Workspaces is one).
type Workspace interface {
	// Open opens a file of the chat's workspace, checked to be inside
	// it and the chat's own; the file sent is the file checked.
	Open(chatKey, name string) (*os.File, error)
	// Path is the path of one, checked likewise, for removing it.
	Path(chatKey, name string) (string, error)
}

// Usage keeps what voice costs, per chat.
type Usage interface {
	AddVoiceUsage(ctx context.Context, chatKey string, spent Spent) error
}

// Meter counts what voice costs as it happens (the /metrics series).
type Meter interface {
	Transcribed(chatKey string, seconds int)
	Spoken(chatKey string, chars int)
}

// Service transcribes and speaks for the delivery pipeline. It is
// bridge.Voice.
type Service struct {
	cfg   Config
	c     *goopenai.Client
	ws    Workspace
	usage Usage
	meter Meter
	retry backoff.Policy
	log   *slog.Logger
}

var _ bridge.Voice = (*Service)(nil)

// Options are a Service's parts besides its config.
type Options struct {
	Workspace  Workspace
	Usage      Usage // optional
	Meter      Meter // optional
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Sleep replaces the wait between attempts (tests).
	Sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Service for cfg (defaults filled by WithDefaults).
func New(cfg Config, o Options) *Service {
	oc := goopenai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	if o.HTTPClient != nil {
		oc.HTTPClient = o.HTTPClient
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{
		cfg: cfg, c: goopenai.NewClientWithConfig(oc), ws: o.Workspace, usage: o.Usage, meter: o.Meter, log: o.Logger,
		retry: backoff.Policy{Attempts: 3, Initial: time.Second, Max: 10 * time.Second, Sleep: o.Sleep},
	}
}

// Listens reports whether voice notes are transcribed
// (voice.transcription_model is set).
func (s *Service) Listens() bool { return s.cfg.Enabled() }

// Limits are the stated size and length past which a note is refused
// before download.
func (s *Service) Limits() (maxBytes int64, maxSeconds int) { return s.cfg.MaxBytes, s.cfg.MaxSeconds }

// Aloud reports whether an answer is spoken too; spoken is whether the
// person's message was a voice note.
func (s *Service) Aloud(spoken bool) bool {
	return s.cfg.Reply == ReplyAlways || (spoken && s.cfg.Reply == ReplyWhenSpoken)
}

// Echo reports whether a note is answered first with its transcript.
func (s *Service) Echo() bool { return s.cfg.Echo }

// Transcribe returns what is said in the note's audio, a file of the
// chat's workspace.
func (s *Service) Transcribe(ctx context.Context, chatKey string, note bridge.VoiceNote) (string, error) {
	if !s.cfg.Enabled() {
		return "", errors.New("voice.transcription_model is not set")
	}
	f, err := s.ws.Open(chatKey, note.File)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var text string
	err = s.retry.Do(ctx, transient, func(ctx context.Context) error {
		// Each try sends the file opened and checked, from its start.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		resp, err := s.c.CreateTranscription(ctx, goopenai.AudioRequest{
			Model: s.cfg.TranscriptionModel, FilePath: filepath.Base(filepath.FromSlash(note.File)), Reader: f, Language: s.cfg.Language,
		})
		text = resp.Text
		return err
	})
	if err != nil {
		return "", fmt.Errorf("voice: transcription: %w", err)
	}
	seconds := note.Seconds
	if seconds == 0 {
		seconds = oggSeconds(f)
	}
	s.count(ctx, chatKey, Spent{Notes: 1, Seconds: seconds})
	return strings.TrimSpace(text), nil
}

// KeepsAudio reports whether a note's audio stays once heard
// (voice.keep_audio).
func (s *Service) KeepsAudio() bool { return *s.cfg.KeepAudio }

// Heard is called once the transcript is stored: without
// voice.keep_audio the audio is deleted then.
func (s *Service) Heard(chatKey string, note bridge.VoiceNote) {
	if *s.cfg.KeepAudio {
		return
	}
	path, err := s.ws.Path(chatKey, note.File)
	if err == nil {
		err = os.Remove(path)
	}
	if err != nil {
		s.log.Warn("voice: could not delete a transcribed note's audio (voice.keep_audio is false)", "chat", chatKey, "file", note.File, "err", err)
	}
}

// Speak reads text aloud, at most voice.speak_chars of it, and returns
// OGG/Opus audio.
func (s *Service) Speak(ctx context.Context, chatKey, text string) ([]byte, error) {
	say := Speakable(text, s.cfg.SpeakChars)
	if say == "" {
		return nil, errors.New("voice: nothing to say")
	}
	var audio []byte
	err := s.retry.Do(ctx, transient, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		resp, err := s.c.CreateSpeech(ctx, goopenai.CreateSpeechRequest{
			Model: goopenai.SpeechModel(s.cfg.SpeechModel), Input: say,
			Voice: goopenai.SpeechVoice(s.cfg.SpeechVoice), ResponseFormat: goopenai.SpeechResponseFormatOpus,
		})
		if err != nil {
			return err
		}
		defer resp.Close()
		audio, err = io.ReadAll(io.LimitReader(resp, maxSpeech+1))
		if err == nil && len(audio) > maxSpeech {
			err = fmt.Errorf("the speech is larger than %d MB", maxSpeech>>20)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("voice: speech: %w", err)
	}
	if len(audio) == 0 {
		return nil, errors.New("voice: speech: the service returned no audio")
	}
	s.count(ctx, chatKey, Spent{Chars: len([]rune(say))})
	return audio, nil
}

func (s *Service) count(ctx context.Context, chatKey string, spent Spent) {
	if s.meter != nil {
		if spent.Seconds > 0 {
			s.meter.Transcribed(chatKey, spent.Seconds)
		}
		if spent.Chars > 0 {
			s.meter.Spoken(chatKey, spent.Chars)
		}
	}
	if s.usage != nil {
		if err := s.usage.AddVoiceUsage(context.WithoutCancel(ctx), chatKey, spent); err != nil {
			s.log.Warn("voice: could not record what a note cost", "chat", chatKey, "err", err)
		}
	}
}

// transient reports a failure worth another try: what the model client
// tries again (openai.Transient), but never a note gone from the
// workspace or a call given up.
func transient(err error) (bool, time.Duration) {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, context.Canceled) {
		return false, 0
	}
	return openai.Transient(err), 0
}

// Speakable is text as it is read aloud: Markdown's marks and link
// targets dropped, and cut at a sentence's or word's end within limit
// characters, saying that the rest is in the text.
func Speakable(text string, limit int) string {
	text = plain(text)
	r := []rune(text)
	if limit <= 0 || len(r) <= limit {
		return text
	}
	const rest = " The rest is in my written answer."
	cut := string(r[:limit])
	if i := strings.LastIndexAny(cut, ".!?\n"); i > len(cut)/2 {
		cut = cut[:i+1]
	} else if i := strings.LastIndexFunc(cut, unicode.IsSpace); i > 0 {
		cut = cut[:i] + "…"
	}
	return strings.TrimSpace(cut) + rest
}

// maxTarget is the longest link target plain drops.
const maxTarget = 2048

// plain drops Markdown's emphasis, heading and code marks and keeps a
// link's words, not its address. One pass over the text.
func plain(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	lineStart := true
	scanned := 0 // text[:scanned] holds no ")" or line end a link needs
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '*' || c == '_' || c == '`' || c == '~':
			continue
		case c == '#' && lineStart:
			for i+1 < len(text) && (text[i+1] == '#' || text[i+1] == ' ') {
				i++
			}
			continue
		case c == ']' && i+1 < len(text) && text[i+1] == '(':
			// A link's target: skipped up to its ")", looked for within
			// maxTarget bytes of the line, so the pass stays linear.
			// What an earlier look found free of both is not read again.
			from, limit := max(i+1, scanned), min(len(text), i+1+maxTarget)
			if from >= limit {
				continue
			}
			end := strings.IndexAny(text[from:limit], ")\n")
			switch {
			case end < 0:
				scanned = limit
			case text[from+end] == ')':
				i = from + end
			default:
				scanned = from + end
			}
			continue
		case c == '[':
			continue
		}
		b.WriteByte(c)
		lineStart = c == '\n'
	}
	return strings.TrimSpace(b.String())
}

// oggSeconds is an OGG file's length in whole seconds (rounded up), read
// from the last page's granule position at Opus's 48 kHz; 0 when the
// file is not OGG.
func oggSeconds(f *os.File) int {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	const tail = 64 << 10
	off := max(st.Size()-tail, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	i := bytes.LastIndex(buf, []byte("OggS"))
	if i < 0 || len(buf)-i < 14 {
		return 0
	}
	granule := binary.LittleEndian.Uint64(buf[i+6 : i+14])
	if granule == math.MaxUint64 {
		return 0
	}
	return int((granule + 47999) / 48000)
}

// Spent is what voice cost a chat so far.
type Spent struct{ Notes, Seconds, Chars int }

// Ledger keeps what voice costs, per chat (store.DB is one).
type Ledger interface {
	Usage
	VoiceUsage(ctx context.Context, chatKey string) (Spent, error)
}

// Setup makes the service when voice notes are heard or answers spoken
// (nil when neither), over llmBase and llmKey unless the section names a
// server of its own, and adds the /status line of what voice cost the
// chat to r.
func Setup(cfg Config, llmBase, llmKey string, o Options, ledger Ledger, r *bridge.Router) bridge.Voice {
	if !cfg.Enabled() && cfg.Reply != ReplyAlways {
		return nil
	}
	o.Usage = ledger
	s := New(cfg.WithDefaults(llmBase, llmKey), o)
	r.AddStatus(func(ctx context.Context, in chat.Inbound) (string, error) {
		u, err := ledger.VoiceUsage(ctx, in.ChatKey)
		if err != nil {
			return "", err
		}
		notes := "notes"
		if u.Notes == 1 {
			notes = "note"
		}
		return fmt.Sprintf("Voice: %s %s heard (%s), %s characters spoken", tools.Thousands(u.Notes), notes,
			bridge.Age(time.Duration(u.Seconds)*time.Second), tools.Thousands(u.Chars)), nil
	})
	return s
}
