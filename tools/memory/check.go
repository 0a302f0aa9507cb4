package memory

import "loadout/config"

// Check checks the memory section.
func (c Config) Check(ch *config.Checker) {
	ch.AtLeast("max_items", c.MaxItems, 1)
	ch.AtLeast("max_chars", c.MaxChars, 20)
}
