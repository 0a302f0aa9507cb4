package console

import "loadout/config"

// Check checks the console section.
func (c Config) Check(ch *config.Checker) {
	if ch.Set[ch.Key("user")] && c.User == "" {
		ch.Bad("user", "must not be empty")
	}
}
