package telegram

import (
	"cmp"
	"context"
	"fmt"
	"net/url"

	"loadout/bridge"
)

// Kind declares the Telegram channel to the program that runs it: the
// section telegram (whose secrets, the bot token and the webhook secret,
// its Config declares) and the bot token's shape, which a Bot API URL
// carries in its path.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "telegram",
		Enabled: func(c Config) bool { return c.Enabled },
		Allowed: func(c Config) []string { return c.AllowedUsers },
		Shapes:  []string{`\b\d{5,}:[\w-]{30,}`},
		Describe: func(c Config) string {
			return "telegram (" + cmp.Or(c.Mode, ModePolling) + ")"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			if c.Mode == ModeWebhook {
				u, err := url.Parse(c.WebhookURL)
				if err != nil || u.Scheme != "https" || u.Host == "" {
					return nil, fmt.Errorf("config: telegram.webhook_url: must be a public https URL, got %q", c.WebhookURL)
				}
			}
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store), nil
		},
	})
}
