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
	sc := c.Config
	sc.ShutdownGrace, sc.MaxStarts = a.cfg.grace(), a.cfg.Delivery.MaxAttempts
	j, err := a.journal("slack")
	if err != nil {
		return nil, err
	}
	sc.Journal = j
	sc.Logger, sc.Observer = a.log, a.metrics
	sc.Exclusive = a.exclusive
	sc.Claim = a.claim()
	sc.Files, sc.Voice = a.workspaces, a.voice
	if sc.HTTPClient == nil {
		sc.HTTPClient = a.api
	}
	return slack.New(sc, a.router, a.db), nil
}
