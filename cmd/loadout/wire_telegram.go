package main

import (
	"context"
	"fmt"
	"net/url"

	"loadout/bridge"
	"loadout/bridge/telegram"
	"loadout/store"
)

var _ telegram.Store = (*store.DB)(nil)

// telegramChannel builds the Telegram channel when telegram.enabled is set.
// In webhook mode it mounts the webhook on the HTTP server at the path of
// telegram.webhook_url.
func (a *app) telegramChannel(ctx context.Context) (bridge.Channel, error) {
	c := a.cfg.Telegram
	if !c.Enabled {
		return nil, nil
	}
	if c.Mode == telegram.ModeWebhook {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("config: telegram.webhook_url: must be a public https URL, got %q", c.WebhookURL)
		}
	}
	tc := c
	var err error
	if tc.Delivery, err = a.delivery("telegram"); err != nil {
		return nil, err
	}
	ad := telegram.New(tc, a.router, a.db)
	a.tgBot = ad
	return ad, nil
}
