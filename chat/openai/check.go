package openai

import (
	"cmp"
	"errors"
	"net/url"
	"strings"
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

// Usable checks what talking to the model needs: OpenAI's service needs
// a key; a local server (Ollama, vLLM, LM Studio) usually needs none.
func (c Config) Usable() error {
	u, err := url.Parse(cmp.Or(c.BaseURL, DefaultBaseURL))
	if strings.TrimSpace(c.APIKey) == "" && err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return errors.New("config: llm.api_key is empty and llm.base_url is OpenAI's: set the key (the sample reads ${OPENAI_API_KEY}), or point llm.base_url at a local server")
	}
	return nil
}
