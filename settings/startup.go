package settings

import (
	"cmp"
	"path/filepath"
	"strings"

	"loadout/chat/openai"
)

// Startup is what a process of command cmd on the config file at path
// says it is about to use, as log attributes: the file, the model and
// its server (host only: a URL may carry credentials), the channels. It
// never holds a secret.
func (cfg Config) Startup(cmd, path string) []any {
	var chans []string
	switch cmd {
	case "chat":
		chans = []string{"console"}
	case "serve":
		for _, k := range cfg.EnabledChannels() {
			chans = append(chans, k.Describe(cfg.Section(k)))
		}
	}
	if len(chans) == 0 {
		chans = []string{"none"}
	}
	host := openai.Host(cfg.LLM.BaseURL)
	var fallbacks []string
	for _, f := range cfg.LLM.Failover.Fallbacks {
		fallbacks = append(fallbacks, openai.Host(f.BaseURL)+" ("+cmp.Or(f.Model, cfg.Model())+")")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if path == "" {
		abs = "(none: defaults and LOADOUT_* variables)"
	}
	voiceNotes := "off (set voice.transcription_model to hear them)"
	if cfg.Voice.Enabled() {
		voiceNotes = cfg.Voice.TranscriptionModel + ", answers spoken: " + cmp.Or(cfg.Voice.Reply, "never")
	}
	attrs := []any{"command", cmd, "config", abs, "model", cfg.Model(), "llm_host", host}
	if len(fallbacks) > 0 {
		attrs = append(attrs, "llm_fallbacks", strings.Join(fallbacks, ", "))
	}
	attrs = append(attrs, "channels", strings.Join(chans, ", "), "google", cfg.Google.Configured(), "voice_notes", voiceNotes, "store", cfg.Store.Path)
	return attrs
}
