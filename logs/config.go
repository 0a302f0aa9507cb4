package logs

import "loadout/config"

// Config is the log section.
type Config struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is text (default) or json.
	Format string `yaml:"format"`
}

// Check checks the log section.
func (c Config) Check(ch *config.Checker) {
	switch c.Level {
	case "debug", "info", "warn", "error":
	default:
		ch.Bad("level", "must be debug, info, warn or error, got %q", c.Level)
	}
	if c.Format != "text" && c.Format != "json" {
		ch.Bad("format", `must be "text" or "json", got %q`, c.Format)
	}
}
