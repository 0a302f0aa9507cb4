package web

import (
	"time"

	"loadout/config"
)

// Check checks the web package's keys of the web section.
func (c Config) Check(ch *config.Checker) {
	ch.URL("searxng_url", c.SearXNGURL)
	ch.URL("brave_url", c.BraveURL)
	if c.MaxBytes < 0 {
		ch.Bad("max_bytes", "must not be negative, got %d", c.MaxBytes)
	}
	ch.AtLeast("max_chars", c.MaxChars, 500)
	ch.Duration("timeout", c.Timeout, time.Second)
}
