package files

import "loadout/config"

// Check checks the files section.
func (c Config) Check(ch *config.Checker) {
	if c.MaxFileBytes < 0 || c.MaxWorkspaceBytes < 0 {
		ch.Bad("max_file_bytes", "and files.max_workspace_bytes must not be negative")
	}
}
