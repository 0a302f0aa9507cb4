package telegram

import (
	"strings"
	"time"

	"loadout/config"
)

// Check checks the telegram section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	if c.Token == "" {
		ch.Bad("token", "is required when telegram.enabled is true")
	}
	switch c.Mode {
	case "", ModePolling:
	case ModeWebhook:
		if c.WebhookURL == "" || c.WebhookSecret == "" {
			ch.Bad("webhook_url", "and telegram.webhook_secret are required when telegram.mode is webhook")
		}
	default:
		ch.Bad("mode", `must be "polling" or "webhook", got %q`, c.Mode)
	}
	if c.APIEndpoint != "" && strings.Count(c.APIEndpoint, "%s") != 2 {
		ch.Bad("api_endpoint", "must contain two %%s (token, method), got %q", c.APIEndpoint)
	}
	ch.AtLeast("workers", c.Workers, 1)
	ch.Duration("poll_timeout", c.PollTimeout, time.Second)
	ch.Duration("typing_interval", c.TypingInterval, time.Second)
	ch.Duration("max_backoff", c.MaxBackoff, time.Second)
}
