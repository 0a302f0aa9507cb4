package tools

import (
	"slices"
	"strings"
)

// Per-chat setting keys, as the store keeps them. The config group writes
// them; the engine reads them through ParseSettings.
const (
	SettingName          = "name"
	SettingSystemPrompt  = "system_prompt"
	SettingModel         = "model"
	SettingDisabledTools = "disabled_tools" // comma-separated tool names
)

// Settings is one chat's overrides. An empty field means the operator's
// default.
type Settings struct {
	Name         string
	SystemPrompt string
	Model        string
	// Disabled holds the tools the chat turned off; nil when none.
	Disabled map[string]bool
}

// ParseSettings reads the stored key/value form.
func ParseSettings(m map[string]string) Settings {
	s := Settings{Name: m[SettingName], SystemPrompt: m[SettingSystemPrompt], Model: m[SettingModel]}
	for n := range strings.SplitSeq(m[SettingDisabledTools], ",") {
		if n = strings.TrimSpace(n); n != "" {
			if s.Disabled == nil {
				s.Disabled = map[string]bool{}
			}
			s.Disabled[n] = true
		}
	}
	return s
}

// DisabledValue is the stored form of a set of disabled tools: the names
// sorted and comma-separated.
func DisabledValue(disabled map[string]bool) string {
	var list []string
	for n, off := range disabled {
		if off {
			list = append(list, n)
		}
	}
	slices.Sort(list)
	return strings.Join(list, ",")
}
