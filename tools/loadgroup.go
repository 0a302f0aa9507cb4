package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// LoadGroupName is the name of the meta-tool that loads a group.
const LoadGroupName = "load_tool_group"

type loadGroupInput struct {
	GroupName string `json:"group_name" desc:"the group to load"`
}

type unloadGroupInput struct {
	GroupName string `json:"group_name" desc:"A loaded group's name"`
}

// UnloadGroupName is the name of the meta-tool that unloads a group.
const UnloadGroupName = "unload_tool_group"

// LoadGroup returns the core meta-tool load_tool_group over r. On success
// it lists the group's tools as "- name: description" and reports the
// group as loaded (Result.Groups); the engine appends the group's schemas
// to the session's catalog. Loading a loaded group again is a harmless
// no-op that returns the same listing.
func LoadGroup(r *Registry) Tool {
	return New(Definition{
		Name:        LoadGroupName,
		Description: "Load a tool group before using its tools; it stays loaded.",
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
		if g.Prepare != nil {
			if err := g.Prepare(ctx); err != nil {
				return nil, err
			}
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
		return loaded{text: b.String(), groups: LoadChanges(name)}, nil
	})
}

// UnloadGroup returns the core meta-tool unload_tool_group over r: the
// group's schemas leave the session's catalog from the next request on,
// recorded like a load so a restart honours it. Unloading a group that is
// not loaded changes nothing.
func UnloadGroup(r *Registry) Tool {
	return New(Definition{
		Name:        UnloadGroupName,
		Description: "Unload a group no longer needed.",
		ReadOnly:    true,
		Timeout:     5 * time.Second,
	}, func(ctx context.Context, in unloadGroupInput) (any, error) {
		name := strings.TrimSpace(in.GroupName)
		if name == "" {
			return nil, &Error{Code: CodeMissingParameter, Message: "Required parameter 'group_name' is missing.",
				Suggestion: "Call unload_tool_group with the name of a loaded group."}
		}
		if _, ok := r.Group(name); !ok {
			return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("Tool group '%s' not found.", name),
				Suggestion: "Call unload_tool_group with the name of a loaded group."}
		}
		if !slices.Contains(CallerFrom(ctx).Loaded, name) {
			return fmt.Sprintf("Tool group '%s' is not loaded; nothing changed.", name), nil
		}
		return loaded{text: fmt.Sprintf("Unloaded tool group '%s'. Load it again if you need its tools.", name),
			groups: []GroupChange{{Name: name, Unload: true}}}, nil
	})
}

// GroupChange is one change a call made to the session's loaded groups:
// Name loaded, or with Unload, unloaded. A call's changes travel in
// Result.Groups and are stored with its result; ApplyGroupChanges replays
// them.
type GroupChange struct {
	Name   string `json:"name"`
	Unload bool   `json:"unload,omitempty"`
}

// LoadChanges are the changes that load names, in their order.
func LoadChanges(names ...string) []GroupChange {
	out := make([]GroupChange, len(names))
	for i, n := range names {
		out[i] = GroupChange{Name: n}
	}
	return out
}

// ApplyGroupChanges applies changes (as in Result.Groups) to loaded, the
// session's groups in load order, and returns the new list. A group
// loaded again keeps its place, so the tools sent before it stay where
// they were; an unloaded one that is loaded later goes to the end.
func ApplyGroupChanges(loaded []string, changes []GroupChange) []string {
	for _, c := range changes {
		switch {
		case c.Unload:
			loaded = slices.DeleteFunc(loaded, func(g string) bool { return g == c.Name })
		case c.Name != "" && !slices.Contains(loaded, c.Name):
			loaded = append(loaded, c.Name)
		}
	}
	return loaded
}
