package matrix

import (
	"strings"
	"time"

	"loadout/config"
)

// Check checks the matrix section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	if c.HomeserverURL == "" {
		ch.Bad("homeserver_url", "is required when matrix.enabled is true")
	} else {
		ch.URL("homeserver_url", c.HomeserverURL)
	}
	if !strings.HasPrefix(c.UserID, "@") || !strings.Contains(c.UserID, ":") {
		ch.Bad("user_id", "must be the bot's Matrix id, such as @loadout:example.org, got %q", c.UserID)
	}
	if c.AccessToken == "" && c.Password == "" {
		ch.Bad("access_token", "or matrix.password is required when matrix.enabled is true")
	}
	switch {
	case c.PickleKey == "" && encryption:
		ch.Bad("pickle_key", "is required when matrix.enabled is true: the bot's encryption keys are kept in the database under it; %s", pickleKeyHelp)
	case c.PickleKey != "" && len(c.PickleKey) < minPickleKey:
		ch.Bad("pickle_key", "must be at least %d characters; %s", minPickleKey, pickleKeyHelp)
	}
	for _, u := range c.AllowedUsers {
		if !strings.HasPrefix(u, "@") || !strings.Contains(u, ":") {
			ch.Bad("allowed_users", "must list Matrix ids such as @ana:example.org, got %q", u)
		}
	}
	ch.AtLeast("workers", c.Workers, 1)
	ch.AtLeast("chunk_size", c.ChunkSize, 100)
	ch.Duration("sync_timeout", c.SyncTimeout, time.Second)
	ch.Duration("key_wait", c.KeyWait, time.Second)
	ch.Duration("max_backoff", c.MaxBackoff, time.Second)
}

// minPickleKey is the shortest matrix.pickle_key taken.
const minPickleKey = 32

// pickleKeyHelp tells how to make a pickle key.
const pickleKeyHelp = "make one with `openssl rand -base64 32` and put it in matrix.pickle_key or the environment variable MATRIX_PICKLE_KEY, the same in every process sharing the database"
