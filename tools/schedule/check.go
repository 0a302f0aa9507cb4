package schedule

import (
	"time"

	"loadout/config"
)

// Check checks the scheduler section.
func (c Config) Check(ch *config.Checker) {
	ch.AtLeast("max_tasks", c.MaxTasks, 1)
	ch.Duration("min_interval", c.MinInterval, time.Minute)
	ch.Duration("catch_up", c.CatchUp, 0)
}
