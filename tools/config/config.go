// Package config is the "config" tool group: the assistant's own settings
// for the current chat, in the domain-tool style (one tool per domain, an
// action parameter, errors that list the allowed values).
package config

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"loadout/tools"
)

// GroupName is the group's name.
const GroupName = "config"

// Store keeps per-chat settings. store.DB implements it.
type Store interface {
	ChatSettings(ctx context.Context, chatKey string) (map[string]string, error)
	SetChatSetting(ctx context.Context, chatKey, key, value string) error
}

// Defaults are the values a chat sees before it overrides them, and
// who may change what someone else set.
type Defaults struct {
	Name, SystemPrompt, Model string
	// Admins may change any setting of any chat (tools.admins); anyone
	// else may change only a setting nobody else set: in a group, the
	// system prompt or model one person set shapes every member's turns.
	Admins tools.Admins
}

// setBy names, among a chat's settings, the person who set a setting:
// "set_by:system_prompt", and "set_by:tool:gmail_send" for the person
// who disabled that tool.
const setBy = "set_by:"

// permit reports whether the caller may change the setting key of a
// chat whose settings are settings: a setting someone else set is
// theirs, or an admin's, to change (tools.Admins.Permit).
func permit(ctx context.Context, admins tools.Admins, settings map[string]string, key, what string) error {
	owner := settings[setBy+key]
	if owner == "" {
		return nil
	}
	return admins.Permit(ctx, owner, what)
}

var (
	agentActions = []string{"view", "update"}
	agentFields  = []string{tools.SettingName, tools.SettingSystemPrompt, tools.SettingModel}
	toolActions  = []string{"list", "enable", "disable"}
)

// Group returns the group definition and its tools. reg is the registry the
// tools are listed from; protected tools (load_tool_group and this group's
// own) cannot be disabled so a chat cannot lock itself out.
func Group(st Store, reg *tools.Registry, def Defaults) (tools.Group, []tools.Tool) {
	g := tools.Group{
		Name:        GroupName,
		DisplayName: "Assistant settings",
		Description: "This chat's assistant name, system prompt, model and tools",
	}
	return g, []tools.Tool{agentConfig(st, def), toolSettings(st, reg, def.Admins)}
}

type agentInput struct {
	Action string `json:"action" desc:"view or update"`
	Field  string `json:"field,omitempty" desc:"name, system_prompt or model; view without field shows all"`
	Value  string `json:"value,omitempty" desc:"new value, required for update; an empty string is refused, use reset to go back to the default"`
	Reset  bool   `json:"reset,omitempty" desc:"with update: return the field to its default"`
}

func agentConfig(st Store, def Defaults) tools.Tool {
	return tools.New(tools.Definition{
		Name:           "agent_config",
		Examples:       []string{"answer in a more formal or shorter way from now on", "change your tone or style", "call yourself a different name", "change how you answer, your instructions", "switch the language model for this chat", "show your settings and system prompt", "talk to me more casually", "always answer in Spanish from now on", "your name should be Max", "what instructions were you given", "use a different model here", "stop using emojis in your replies", "be funnier", "speak like a pirate from now on", "reply in bullet points always", "your personality", "make your answers shorter", "I'd like you to sound friendlier"},
		Description:    "View or update your own settings for this chat. Actions: view, update. Fields: name, system_prompt, model.",
		WritesSettings: true,
	}, func(ctx context.Context, in agentInput) (any, error) {
		chatKey := tools.CallerFrom(ctx).ChatKey
		if !slices.Contains(agentActions, in.Action) {
			return nil, agentError(fmt.Sprintf("Invalid action '%s'.", in.Action))
		}
		if in.Field != "" && !slices.Contains(agentFields, in.Field) {
			return nil, agentError(fmt.Sprintf("Invalid field '%s'.", in.Field))
		}
		settings, err := st.ChatSettings(ctx, chatKey)
		if err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		defaults := map[string]string{tools.SettingName: def.Name, tools.SettingSystemPrompt: def.SystemPrompt, tools.SettingModel: def.Model}
		value := func(f string) any {
			if v, ok := settings[f]; ok {
				return v
			}
			if defaults[f] == "" {
				return nil
			}
			return defaults[f]
		}
		if in.Action == "view" {
			if in.Field == "" {
				all := map[string]any{}
				for _, f := range agentFields {
					all[f] = value(f)
				}
				return map[string]any{"type": "config", "action": "view", "values": all}, nil
			}
			return map[string]any{"type": "config", "action": "view", "field": in.Field, "value": value(in.Field)}, nil
		}
		if in.Field == "" {
			return nil, agentError("Field is required for update.")
		}
		v := strings.TrimSpace(in.Value)
		if !in.Reset && v == "" {
			return nil, agentError("value is required for update (or set reset to true).")
		}
		if len(v) > 8000 {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("value is %d characters; the limit is 8000.", len(v))}
		}
		if in.Reset {
			v = ""
		}
		if err := permit(ctx, def.Admins, settings, in.Field, "This chat's "+strings.ReplaceAll(in.Field, "_", " ")); err != nil {
			return nil, err
		}
		if err := st.SetChatSetting(ctx, chatKey, in.Field, v); err != nil {
			return nil, fmt.Errorf("save setting: %w", err)
		}
		owner := tools.CallerFrom(ctx).UserKey
		if v == "" {
			owner = ""
		}
		if err := st.SetChatSetting(ctx, chatKey, setBy+in.Field, owner); err != nil {
			return nil, fmt.Errorf("save setting: %w", err)
		}
		settings[in.Field] = v
		if in.Reset {
			delete(settings, in.Field)
		}
		return map[string]any{"type": "config", "action": "update", "field": in.Field, "value": value(in.Field)}, nil
	})
}

func agentError(msg string) *tools.Error {
	return &tools.Error{
		Code:       tools.CodeInvalidArgument,
		Message:    msg,
		Suggestion: "Call agent_config again with one of the allowed actions and fields.",
		Details:    map[string]any{"allowed_actions": agentActions, "allowed_fields": agentFields},
	}
}

type toolInput struct {
	Action string   `json:"action" desc:"list, enable or disable"`
	Tools  []string `json:"tools,omitempty" desc:"tool names, required for enable and disable"`
	Group  string   `json:"group,omitempty" desc:"with enable or disable: every tool of this group"`
}

type toolRow struct {
	Name    string `json:"name"`
	Group   string `json:"group"`
	Enabled bool   `json:"enabled"`
}

func toolSettings(st Store, reg *tools.Registry, admins tools.Admins) tools.Tool {
	protected := map[string]bool{tools.LoadGroupName: true, "agent_config": true, "tool_settings": true}
	return tools.New(tools.Definition{
		Name:           "tool_settings",
		Examples:       []string{"turn a tool off for this chat", "switch the tool back on", "which tools are disabled here", "what tools can you use in this chat", "don't let yourself send emails here", "turn off the calendar tools", "allow web search again in this chat", "list which tools are on or off", "block yourself from deleting anything", "which features are enabled here", "switch web browsing back on", "I don't want you to touch my calendar in this chat"},
		Description:    "List the tools and whether each is enabled in this chat, or enable/disable tools (a disabled tool is removed from every tool list of this chat). Actions: list, enable, disable.",
		WritesSettings: true,
	}, func(ctx context.Context, in toolInput) (any, error) {
		chatKey := tools.CallerFrom(ctx).ChatKey
		if !slices.Contains(toolActions, in.Action) {
			return nil, &tools.Error{
				Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("Invalid action '%s'.", in.Action),
				Suggestion: "Use list, enable or disable.",
				Details:    map[string]any{"allowed_actions": toolActions},
			}
		}
		settings, err := st.ChatSettings(ctx, chatKey)
		if err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		disabled := tools.ParseSettings(settings).Disabled
		if disabled == nil {
			disabled = map[string]bool{}
		}
		all := reg.All(nil)
		if in.Action == "list" {
			rows := make([]toolRow, len(all))
			for i, d := range all {
				rows[i] = toolRow{Name: d.Name, Group: groupLabel(d.Group), Enabled: !disabled[d.Name]}
			}
			return map[string]any{"type": "tools", "tools": rows}, nil
		}
		names := append([]string(nil), in.Tools...)
		if in.Group != "" {
			if _, ok := reg.Group(in.Group); !ok {
				return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("Tool group '%s' not found. Available groups: %s", in.Group, reg.GroupNames())}
			}
			for _, d := range reg.GroupTools(in.Group, nil) {
				if !protected[d.Name] {
					names = append(names, d.Name)
				}
			}
		}
		if len(names) == 0 {
			return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Required parameter 'tools' (or 'group') is missing.",
				Suggestion: "Name the tools to " + in.Action + "; use action list to see them."}
		}
		for _, n := range names {
			if _, ok := reg.Tool(n); !ok {
				return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("Tool '%s' does not exist.", n),
					Suggestion: "Use action list to see the tool names."}
			}
			if protected[n] && in.Action == "disable" {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("Tool '%s' cannot be disabled.", n)}
			}
			if in.Action == "enable" && disabled[n] {
				// Switching a tool off takes nothing from anyone; on
				// again, it is the decision of whoever switched it off.
				if err := permit(ctx, admins, settings, "tool:"+n, fmt.Sprintf("The switch that turned %s off in this chat", n)); err != nil {
					return nil, err
				}
			}
			disabled[n] = in.Action == "disable"
		}
		by := tools.CallerFrom(ctx).UserKey
		for _, n := range names {
			owner := ""
			if in.Action == "disable" {
				owner = by
			}
			if err := st.SetChatSetting(ctx, chatKey, setBy+"tool:"+n, owner); err != nil {
				return nil, fmt.Errorf("save setting: %w", err)
			}
		}
		value := tools.DisabledValue(disabled)
		if err := st.SetChatSetting(ctx, chatKey, tools.SettingDisabledTools, value); err != nil {
			return nil, fmt.Errorf("save setting: %w", err)
		}
		var list []string
		if value != "" {
			list = strings.Split(value, ",")
		}
		return map[string]any{"type": "tools", "action": in.Action, "tools": names, "disabled": list}, nil
	})
}

func groupLabel(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// Register adds the config group.
func Register(reg *tools.Registry, st Store, def Defaults) error {
	g, ts := Group(st, reg, def)
	return reg.AddGroup(g, ts...)
}
