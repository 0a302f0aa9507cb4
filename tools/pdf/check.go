package pdf

import "loadout/config"

// Check checks the pdf section.
func (c Config) Check(ch *config.Checker) {
	if c.MaxWorkers < 0 {
		ch.Bad("max_workers", "must be 1 or more (0: the number of CPUs), got %d", c.MaxWorkers)
	}
}
