package discord

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"loadout/config"
)

var tokenShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^` + TokenShape[2:] + `$`) })

// Check checks the discord section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	switch {
	case c.Token == "":
		ch.Bad("token", "is required when discord.enabled is true (the bot token from the Developer Portal's Bot page)")
	case strings.HasPrefix(c.Token, "Bot "):
		ch.Bad("token", `must be the token alone, without "Bot " before it`)
	case !tokenShape().MatchString(c.Token):
		ch.Bad("token", "does not look like a Discord bot token (three parts separated by dots)")
	}
	ids := func(key string, list []string, usernames bool) {
		for _, v := range list {
			v = strings.TrimSpace(v)
			if usernames && strings.HasPrefix(v, "@") && len(v) > 1 {
				continue
			}
			if _, err := strconv.ParseUint(v, 10, 64); err != nil {
				ch.Bad(key, "must hold numeric ids (Developer Mode → Copy ID), got %q", v)
			}
		}
	}
	ids("allowed_users", c.AllowedUsers, true)
	ids("allowed_guilds", c.AllowedGuilds, false)
	ids("allowed_roles", c.AllowedRoles, false)
	ids("guilds", c.Guilds, false)
	ch.URL("api_url", c.APIURL)
	if c.GatewayURL != "" {
		if u, err := url.Parse(c.GatewayURL); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			ch.Bad("gateway_url", "must be a ws(s) URL, got %q", c.GatewayURL)
		}
	}
	ch.AtLeast("workers", c.Workers, 1)
	ch.Duration("typing_interval", c.TypingInterval, time.Second)
	ch.Duration("max_backoff", c.MaxBackoff, time.Second)
}
