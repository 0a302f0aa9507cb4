package feishu

import (
	"strings"

	"loadout/config"
)

// Check checks the feishu section (when the channel is enabled). Each
// problem names its key: "config: feishu.app_id: …".
func (c Config) Check(ch *config.Checker) {
	switch {
	case c.AppID == "":
		ch.Bad("app_id", "is required when feishu.enabled is true (the app's id, cli_…, from the developer console's Credentials & Basic Info)")
	case !strings.HasPrefix(c.AppID, "cli_") || !plainID(c.AppID):
		ch.Bad("app_id", `must be the app's id, which starts with "cli_", got %q`, c.AppID)
	}
	if c.AppSecret == "" {
		ch.Bad("app_secret", "is required: the app's secret, from Credentials & Basic Info")
	}
	if c.VerificationToken == "" {
		ch.Bad("verification_token", "is required: the verification token of Events & Callbacks → Encryption Strategy")
	}
	if c.EncryptKey == "" {
		ch.Bad("encrypt_key", "is required: set an encrypt key in Events & Callbacks → Encryption Strategy and copy it here; without it Feishu signs nothing, and the channel takes no unsigned event")
	}
	switch p := c.CallbackPath; {
	case p == "":
	case !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, " {}?#"):
		ch.Bad("callback_path", "must be a path starting with / and not ending with one, got %q", p)
	case p == "/healthz" || p == "/readyz" || p == "/metrics" || strings.HasPrefix(p, "/debug/"):
		ch.Bad("callback_path", "%q is one of loadout's own endpoints; choose another path", p)
	}
	ch.URL("api_url", c.APIURL)
	for _, u := range c.AllowedUsers {
		if u = strings.TrimSpace(u); !strings.HasPrefix(u, openIDPrefix) || !plainID(u) {
			ch.Bad("allowed_users", `must hold open ids, which start with "ou_" (the log names the open id of each person refused), got %q`, u)
		}
	}
}
