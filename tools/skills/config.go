package skills

import (
	"os"

	"loadout/config"
)

// Config is the skills section.
type Config struct {
	// Dir holds one folder per skill, each with a SKILL.md.
	Dir string `yaml:"dir"`
}

// Check checks the skills section.
func (c Config) Check(ch *config.Checker) {
	if st, err := os.Stat(c.Dir); c.Dir != "" && (err != nil || !st.IsDir()) {
		ch.Bad("dir", "%q is not a readable directory", c.Dir)
	}
}
