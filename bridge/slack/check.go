package slack

import (
	"strings"
	"time"

	"loadout/config"
)

// Check checks the slack section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	if !strings.HasPrefix(c.BotToken, "xoxb-") {
		ch.Bad("bot_token", "must be a bot token starting with xoxb-")
	}
	switch c.Mode {
	case "", ModeSocket:
		if !strings.HasPrefix(c.AppToken, "xapp-") {
			ch.Bad("app_token", "must be an app-level token starting with xapp- when slack.mode is socket")
		}
	case ModeEvents:
		if c.SigningSecret == "" {
			ch.Bad("signing_secret", "is required when slack.mode is events")
		}
	default:
		ch.Bad("mode", `must be "socket" or "events", got %q`, c.Mode)
	}
	ch.AtLeast("workers", c.Workers, 1)
	ch.AtLeast("attempts", c.Attempts, 1)
	ch.AtLeast("chunk_size", c.ChunkSize, 100)
	ch.Duration("backoff", c.Backoff, time.Millisecond)
}
