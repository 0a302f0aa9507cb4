package slack

import (
	"cmp"
	"context"

	"loadout/bridge"
)

// Kind declares the Slack channel to the program that runs it: the
// section slack (whose secrets, both tokens and the signing secret, its
// Config declares) and their shapes. In events mode the channel serves /slack/events and
// /slack/commands on the process's HTTP server.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "slack",
		Enabled: func(c Config) bool { return c.Enabled },
		Allowed: func(c Config) []string { return c.AllowedUsers },
		Shapes: []string{
			`xox[abposr]-[\w-]+`, // bot and user tokens
			`xapp-[\w-]+`,        // app-level token
		},
		Describe: func(c Config) string {
			return "slack (" + cmp.Or(c.Mode, ModeSocket) + ")"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store), nil
		},
	})
}
