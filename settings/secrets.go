package settings

import (
	"io"
	"log/slog"
	"os"

	"loadout/bridge/triggers"
	"loadout/config"
	"loadout/logs"
	"loadout/ui"
)

// entries are every key of c and of each channel's section (under the
// channel's name), each with what it declares secret: the `secret` tags
// of the sections' types (config.Secrecy), the one declaration of a
// secret that the logger and the console read.
func (c Config) Entries() []config.Entry {
	out := config.Entries("", c)
	for _, k := range ChannelKinds() {
		out = append(out, config.Entries(k.Name(), c.Section(k))...)
	}
	return out
}

// secrets are every secret the configuration declares: the values of
// its secret keys, the channels' included, every value of the maps that
// hand an environment or headers to another program, the credentials
// its URLs, DSN and MCP servers' arguments carry, and the values of the
// variables tools.custom_secrets names (read from the process's
// environment, as the tools read them). None reaches a log line or the
// console.
func (c Config) Secrets() []string {
	var out []string
	for _, e := range c.Entries() {
		out = append(out, e.Secrets(os.Getenv)...)
	}
	return out
}

// Shapes are the forms of the credentials the program makes or takes
// that the config does not hold: the channels' tokens, the secrets of
// the triggers people make.
func Shapes() []string {
	return append(ChannelKinds().Shapes(), triggers.Shape)
}

// settings is the effective configuration, key by key, for the console
// (ui.SettingOf).
func (c Config) Settings() []ui.Setting {
	redact := logs.NewRedactor(c.Secrets(), Shapes())
	var out []ui.Setting
	for _, e := range c.Entries() {
		out = append(out, ui.SettingOf(e, redact))
	}
	return out
}

// Logger writes c.Log's level and format to w, with every secret c
// declares (Secrets) and anything shaped like a credential (Shapes)
// taken out.
func (c Config) Logger(w io.Writer) *slog.Logger {
	return logs.New(w, c.Log.Level, c.Log.Format, c.Secrets(), Shapes())
}
