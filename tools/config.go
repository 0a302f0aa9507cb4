package tools

import (
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"loadout/config"
)

// Routing modes (tools.routing): the model sees the core tools and a
// listing of groups it loads, or every schema on every turn.
const (
	RoutingGroups = "groups"
	RoutingAll    = "all"
)

// Config is the tools section: which schemas the model sees, which calls
// wait for approval, who may make tools, and where manifests are.
type Config struct {
	// Routing is "groups" (default: core tools and a listing of groups)
	// or "all" (every schema on every turn).
	Routing string `yaml:"routing"`
	// CatalogBudget bounds, in tokens, the schemas of a session's loaded
	// groups; 0 is no bound.
	CatalogBudget int `yaml:"catalog_budget"`
	// ManifestsDir holds JSON tool manifests, one group per file.
	ManifestsDir string `yaml:"manifests_dir"`
	// Admins are the user keys that may create tools from a chat, and
	// change, run or delete what others own (scheduled tasks).
	Admins []string `yaml:"admins"`
	// CustomSecrets are the environment variables a tool made in a chat
	// may send in its headers, each bound to the hosts listed (an empty
	// list: the tool's own host, whatever it is).
	CustomSecrets map[string][]string `yaml:"custom_secrets" secret:"env"`
	// Confirm is which calls wait for the person's approval:
	// destructive (default), mutating or none; ConfirmTools overrides it
	// per tool (always or never); ConfirmTTL is how long a question waits.
	Confirm      string            `yaml:"confirm"`
	ConfirmTools map[string]string `yaml:"confirm_tools"`
	// ConfirmAfterUntrusted is what waits once a turn has read
	// untrusted content: mutating (default), destructive or off.
	ConfirmAfterUntrusted string          `yaml:"confirm_after_untrusted"`
	ConfirmTTL            config.Duration `yaml:"confirm_ttl"`
	// Rules are the operator's rules: standing decisions (allow, ask,
	// deny) on calls within a scope, for everyone; a person's own rule
	// cannot loosen them.
	Rules []Rule `yaml:"rules"`
	// AuditDays is how long the audit trail keeps a decision. Default
	// 365.
	AuditDays int `yaml:"audit_days"`
}

// Policy is the section's approval policy.
func (c Config) Policy() Policy {
	return Policy{Level: c.Confirm, Tools: c.ConfirmTools, AfterUntrusted: c.ConfirmAfterUntrusted}
}

// Check checks the tools section.
func (c Config) Check(ch *config.Checker) {
	if c.Routing != "" && c.Routing != RoutingGroups && c.Routing != RoutingAll {
		ch.Bad("routing", `must be "groups" or "all", got %q`, c.Routing)
	}
	for _, name := range slices.Sorted(maps.Keys(c.CustomSecrets)) {
		if !config.IsEnvName(name) {
			ch.Bad("custom_secrets", "%q is not an environment variable's name", name)
		}
		for _, h := range c.CustomSecrets[name] {
			if h = strings.TrimSpace(h); h == "" || strings.ContainsAny(h, "/:@ ") {
				ch.Bad("custom_secrets."+name, "must list host names like api.example.com, got %q", h)
			}
		}
	}
	ch.Err(c.Policy().Check())
	_, err := OperatorRules(c.Rules)
	ch.Err(err)
	if c.AuditDays < 0 {
		ch.Bad("audit_days", "must be a number of days (0 for the default, 365), got %d", c.AuditDays)
	}
	ch.Duration("confirm_ttl", c.ConfirmTTL.Std(), time.Minute)
	if c.CatalogBudget < 0 {
		ch.Bad("catalog_budget", "must be 0 (no budget) or a number of tokens, got %d", c.CatalogBudget)
	}
	if st, err := os.Stat(c.ManifestsDir); c.ManifestsDir != "" && (err != nil || !st.IsDir()) {
		ch.Bad("manifests_dir", "%q is not a readable directory", c.ManifestsDir)
	}
}
