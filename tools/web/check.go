package web

import (
	"strings"
	"time"

	"loadout/config"
	"loadout/tools/guard"
)

// Check checks the web package's keys of the web section.
func (c Config) Check(ch *config.Checker) {
	if _, err := guard.New(guard.Config{AllowHosts: c.AllowHosts}); err != nil {
		ch.Bad("allow_hosts", "%v", strings.TrimPrefix(err.Error(), "web.allow_hosts: "))
	}
	ch.URL("searxng_url", c.SearXNGURL)
	ch.URL("brave_url", c.BraveURL)
	if c.MaxBytes < 0 {
		ch.Bad("max_bytes", "must not be negative, got %d", c.MaxBytes)
	}
	ch.AtLeast("max_chars", c.MaxChars, 500)
	ch.Duration("timeout", c.Timeout, time.Second)
}
