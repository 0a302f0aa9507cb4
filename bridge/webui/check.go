package webui

import "loadout/config"

// Check checks the webui section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	if ch.Set[ch.Key("max_upload_mb")] && c.MaxUploadMB < 1 {
		ch.Bad("max_upload_mb", "must be 1 or more (MB), got %d", c.MaxUploadMB)
	}
	if c.MaxUploadMB > 2048 {
		ch.Bad("max_upload_mb", "must be at most 2048 (MB), got %d", c.MaxUploadMB)
	}
}
