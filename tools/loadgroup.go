package tools

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// LoadGroupName is the name of the meta-tool that loads a group.
const LoadGroupName = "load_tool_group"

type loadGroupInput struct {
	GroupName string `json:"group_name" desc:"The name of the tool group to load"`
}

// LoadGroup returns the core meta-tool load_tool_group over r. On success
// it lists the group's tools as "- name: description"; the engine adds the
// group's schemas to the session's catalog. Loading a loaded group again is
// a harmless no-op that returns the same listing.
func LoadGroup(r *Registry) Tool {
	return New(Definition{
		Name:        LoadGroupName,
		Description: "Load a tool group; you must before using its tools. They stay loaded for this conversation.",
		ReadOnly:    true,
		Timeout:     5 * time.Second,
	}, func(ctx context.Context, in loadGroupInput) (any, error) {
		name := strings.TrimSpace(in.GroupName)
		if name == "" {
			return nil, &Error{Code: CodeMissingParameter, Message: "Required parameter 'group_name' is missing.",
				Suggestion: "Call load_tool_group with one of: " + r.GroupNames()}
		}
		g, ok := r.Group(name)
		if !ok {
			return nil, &Error{
				Code:       CodeNotFound,
				Message:    fmt.Sprintf("Tool group '%s' not found. Available groups: %s", name, r.GroupNames()),
				Suggestion: "Call load_tool_group again with one of the available group names.",
			}
		}
		if g.Admit != nil && !g.Admit(ctx) {
			return nil, &Error{Code: CodePermission, Message: fmt.Sprintf("Tool group '%s' is for the operator's admins only.", name),
				Suggestion: "Tell the person only an admin (tools.admins) can use it."}
		}
		defs := r.GroupTools(name, CallerFrom(ctx).Disabled)
		if len(defs) == 0 {
			return nil, &Error{Code: CodeEmptyGroup, Message: fmt.Sprintf("Tool group '%s' has no available tools.", name),
				Suggestion: "Its tools are disabled in this chat; tell the person, or enable them with tool_settings."}
		}
		var b strings.Builder
		noun := "tools"
		if len(defs) == 1 {
			noun = "tool"
		}
		fmt.Fprintf(&b, "Loaded %d %s from group '%s':", len(defs), noun, g.DisplayName)
		for _, d := range defs {
			fmt.Fprintf(&b, "\n- %s: %s", d.Name, d.Description)
		}
		return b.String(), nil
	})
}
