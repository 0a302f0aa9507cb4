package main

import (
	"context"

	"loadout/bridge"
	"loadout/bridge/slack"
	"loadout/store"
)

var _ bridge.Inbox = (*store.DB)(nil)

// slackChannel builds the Slack channel when slack.enabled is set. In
// events mode it also mounts /slack/events and /slack/commands on the
// HTTP server.
func (a *app) slackChannel(ctx context.Context) (bridge.Channel, error) {
	c := a.cfg.Slack
	if !c.Enabled {
		return nil, nil
	}
	sc := c
	var err error
	if sc.Delivery, err = a.delivery("slack"); err != nil {
		return nil, err
	}
	return slack.New(sc, a.router, a.db), nil
}
