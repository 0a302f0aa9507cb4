package main

import "context"

// slackChannel builds the Slack channel when slack.enabled is set.
func (a *app) slackChannel(ctx context.Context) (string, runner, error) {
	if !a.cfg.Slack.Enabled {
		return "", nil, nil
	}
	return "", nil, errNotBuilt("slack")
}
