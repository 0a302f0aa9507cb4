package mattermost

import (
	"net/url"
	"strings"
	"time"

	"loadout/config"
)

// Check checks the mattermost section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	switch u, err := url.Parse(c.URL); {
	case c.URL == "":
		ch.Bad("url", "is required when mattermost.enabled is true (the server's address, such as https://chat.example.com)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		ch.Bad("url", "must be an http(s) URL, got %q", c.URL)
	case strings.Contains(u.Path, "/api/"):
		ch.Bad("url", "must be the server's address without /api/v4, got %q", c.URL)
	}
	switch {
	case c.Token == "":
		ch.Bad("token", "is required when mattermost.enabled is true (a bot account's access token)")
	case strings.HasPrefix(strings.ToLower(c.Token), "bearer "):
		ch.Bad("token", `must be the token alone, without "Bearer " before it`)
	case !isID(c.Token):
		ch.Bad("token", "does not look like a Mattermost access token (26 lowercase letters and digits)")
	}
	for _, v := range c.AllowedUsers {
		if v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "@")); v == "" || strings.ContainsAny(v, " \t:,") {
			ch.Bad("allowed_users", "must hold usernames or user ids, got %q", v)
		}
	}
	ch.URL("actions_url", c.ActionsURL)
	ch.AtLeast("workers", c.Workers, 1)
	ch.AtLeast("max_message", c.MaxMessage, 100)
	ch.Duration("typing_interval", c.TypingInterval, time.Second)
	ch.Duration("max_backoff", c.MaxBackoff, time.Second)
}
