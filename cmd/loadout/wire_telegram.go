package main

import "context"

// telegramChannel builds the Telegram channel when telegram.enabled is set.
func (a *app) telegramChannel(ctx context.Context) (string, runner, error) {
	if !a.cfg.Telegram.Enabled {
		return "", nil, nil
	}
	return "", nil, errNotBuilt("telegram")
}
