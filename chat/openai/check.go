package openai

import (
	"time"

	"loadout/config"
)

// Check checks the model service's keys of the llm section.
func (c Config) Check(ch *config.Checker) {
	ch.AtLeast("attempts", c.Attempts, 1)
	ch.Duration("timeout", c.Timeout, time.Second)
	ch.Duration("backoff", c.Backoff, time.Millisecond)
	ch.Duration("max_backoff", c.MaxBackoff, time.Millisecond)
	ch.URL("base_url", c.BaseURL)
}
