package openai

import (
	"cmp"
	"fmt"
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
	if c.MaxTokens < 0 {
		ch.Bad("max_tokens", "must be 0 (the server's limit) or more, got %d", c.MaxTokens)
	}
}

// Check checks llm.fallbacks and llm.breaker.
func (c FailoverConfig) Check(ch *config.Checker) {
	for i, f := range c.Fallbacks {
		key := fmt.Sprintf("fallbacks[%d].", i)
		if strings.TrimSpace(f.BaseURL) == "" {
			ch.Bad(key+"base_url", "must be set: the fallback's OpenAI-compatible server, e.g. https://openrouter.ai/api/v1")
		} else {
			ch.URL(key+"base_url", f.BaseURL)
		}
		if f.MaxTokens < 0 {
			ch.Bad(key+"max_tokens", "must be 0 (llm.max_tokens) or more, got %d", f.MaxTokens)
		}
		ch.Duration(key+"timeout", f.Timeout, time.Second)
	}
	ch.AtLeast("breaker.failures", c.Breaker.Failures, 1)
	ch.Duration("breaker.cooldown", c.Breaker.Cooldown, time.Second)
	ch.Duration("breaker.max_cooldown", c.Breaker.MaxCooldown, time.Second)
	if c.Breaker.MaxCooldown > 0 && c.Breaker.MaxCooldown < cmp.Or(c.Breaker.Cooldown, 30*time.Second) {
		ch.Bad("breaker.max_cooldown", "must be at least llm.breaker.cooldown (%s), got %s", cmp.Or(c.Breaker.Cooldown, 30*time.Second), c.Breaker.MaxCooldown)
	}
}

// Usable checks what talking to the model needs: OpenAI's service needs
// a key; a local server (Ollama, vLLM, LM Studio) usually needs none.
func (c Config) Usable() error {
	if needsKey(c.BaseURL, c.APIKey) {
		return fmt.Errorf("config: llm.api_key is empty and llm.base_url is OpenAI's: set the key (the sample reads ${OPENAI_API_KEY}), or point llm.base_url at a local server")
	}
	return nil
}

// Usable checks each fallback as Config.Usable checks llm.
func (c FailoverConfig) Usable() error {
	for i, f := range c.Fallbacks {
		if needsKey(f.BaseURL, f.APIKey) {
			return fmt.Errorf("config: llm.fallbacks[%d].api_key is empty and its base_url is OpenAI's: set the key", i)
		}
	}
	return nil
}

func needsKey(base, key string) bool {
	u, err := url.Parse(cmp.Or(base, DefaultBaseURL))
	return strings.TrimSpace(key) == "" && err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}
