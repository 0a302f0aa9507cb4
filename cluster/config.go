package cluster

import (
	"time"

	"loadout/config"
)

// Config is the cluster section: how processes sharing a database split
// the duties only one may perform.
type Config struct {
	// Lease is how long a duty's lease lasts unless renewed: how soon
	// another process takes over a dead one's duty. Default 15s.
	Lease config.Duration `yaml:"lease"`
}

// Check checks the cluster section.
func (c Config) Check(ch *config.Checker) {
	ch.Duration("lease", c.Lease.Std(), 3*time.Second)
}
