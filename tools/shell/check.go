package shell

import (
	"time"

	"loadout/config"
)

// Check checks the exec section.
func (c Config) Check(ch *config.Checker) {
	if c.Enabled && len(c.Allow) == 0 {
		ch.Bad("allow", "must list the commands exec may run when exec.enabled is true")
	}
	ch.Duration("timeout", c.Timeout, 100*time.Millisecond)
	if c.MaxRunning < 0 {
		ch.Bad("max_running", "must be 1 or more (0: the number of CPUs), got %d", c.MaxRunning)
	}
}
