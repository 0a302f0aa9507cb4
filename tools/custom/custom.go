// Package custom lets the operator's admins create HTTP tools from a
// chat: the custom_tools group creates, lists, updates and deletes them,
// and they live in the custom group, in the manifest format, available at
// once without a restart. Their URLs are called through the web tools'
// guard, and their headers can hold secrets only as ${VAR} references to
// the operator's environment, never as values typed in a chat.
package custom

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"loadout/tools"
	"loadout/tools/manifest"
)

// Spec is one custom tool, as a manifest entry.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	ReadOnly    bool            `json:"read_only,omitempty"`
	Effect      string          `json:"effect,omitempty"`
	HTTP        HTTP            `json:"http"`
}

// HTTP is where a custom tool sends its call.
type HTTP struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Store keeps the custom tools.
type Store interface {
	CustomTools(ctx context.Context) ([]Spec, error)
	SaveCustomTool(ctx context.Context, s Spec, by string) error
	DeleteCustomTool(ctx context.Context, name string) (bool, error)
}

// Manager keeps the custom group in step with the store.
type Manager struct {
	reg    *tools.Registry
	store  Store
	client *http.Client
	admins tools.Admins
	// secrets are the variables a tool made here may send, each with the
	// hosts it may go to (none: any) (tools.custom_secrets).
	secrets map[string][]string
	check   func(*url.URL) error
	mu      sync.Mutex
}

// GroupName is the group the custom tools are in.
const GroupName = "custom"

// New returns a manager. admins are user keys (tools.admins); secrets
// are the environment variables a tool's headers may send, each bound to
// the hosts listed (none: any host) (tools.custom_secrets); client calls
// the tools (through the guard); check refuses a URL the guard would
// refuse, for a clear error at creation.
func New(reg *tools.Registry, st Store, client *http.Client, admins []string, secrets map[string][]string, check func(*url.URL) error) *Manager {
	return &Manager{reg: reg, store: st, client: client, admins: tools.NewAdmins(admins), secrets: secrets, check: check}
}

// Load registers the stored custom tools; call it once at start.
func (m *Manager) Load(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	specs, err := m.store.CustomTools(ctx)
	if err != nil {
		return err
	}
	return m.install(specs)
}

// install makes specs the custom group's tools.
func (m *Manager) install(specs []Spec) error {
	raw, err := json.Marshal(specs)
	if err != nil {
		return err
	}
	l, err := manifest.ParseWith(raw, GroupName, m.client, m.secret)
	if err != nil {
		return err
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	desc := "Tools an admin made in a chat"
	if len(names) > 0 {
		desc += ": " + strings.Join(names, ", ")
	}
	return m.reg.ReplaceGroup(tools.Group{Name: GroupName, DisplayName: "Custom tools", Description: desc}, l.Tools...)
}

// secret is the value of name for a request to host, when
// tools.custom_secrets lets a tool made in a chat send it there. It holds
// at every call, also for tools stored before the list changed.
func (m *Manager) secret(name, host string) (string, error) {
	if err := m.mayCarry(name, host); err != nil {
		return "", &tools.Error{Code: tools.CodePermission, Message: "This tool cannot be called: " + err.Error() + ".",
			Suggestion: "Tell the person an admin must change the tool, or the operator tools.custom_secrets."}
	}
	return os.Getenv(name), nil
}

// mayCarry says why variable name may not be sent to host, or nil.
func (m *Manager) mayCarry(name, host string) error {
	hosts, ok := m.secrets[name]
	switch {
	case !ok:
		return fmt.Errorf("${%s} is not in tools.custom_secrets, the operator's list of what tools made in a chat may send", name)
	case len(hosts) > 0 && !slices.ContainsFunc(hosts, func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), host) }):
		return fmt.Errorf("${%s} may be sent only to %s (tools.custom_secrets), not to %s", name, strings.Join(hosts, ", "), host)
	}
	return nil
}

// admitted reports whether the caller is an admin.
func (m *Manager) admitted(ctx context.Context) bool {
	return m.admins.Has(tools.CallerFrom(ctx).UserKey)
}

// Group is the custom_tools group, for admins only.
func (m *Manager) Group() tools.Group {
	return tools.Group{Name: "custom_tools", DisplayName: "Custom tool management",
		Description: "Admins: manage HTTP tools", Admit: m.admitted}
}

type input struct {
	Action      string            `json:"action" enum:"create,list,update,delete"`
	Name        string            `json:"name,omitempty" desc:"the tool's name"`
	Description string            `json:"description,omitempty"`
	Parameters  map[string]any    `json:"parameters,omitempty" desc:"JSON Schema object of its arguments"`
	Method      string            `json:"method,omitempty" enum:"GET,POST"`
	URL         string            `json:"url,omitempty" desc:"the endpoint; GET adds arguments as query" reach:"url"`
	Headers     map[string]string `json:"headers,omitempty" desc:"values only as ${VAR} of the operator's environment"`
	ReadOnly    bool              `json:"read_only,omitempty"`
	Effect      string            `json:"effect,omitempty" enum:"read-only,mutating,destructive" desc:"destructive if it sends, deletes, shares or pays"`
}

// envRef is the only form a header value may take.
var envRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`) })

// Tool is custom_tools.
func (m *Manager) Tool() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "custom_tools",
		Examples:    []string{"make a new tool that calls an HTTP API", "list the tools made in this chat", "change or delete a custom tool", "build a tool for our internal API", "add a custom integration with our CRM", "which custom tools exist", "remove the tool we made for the weather API", "define a new HTTP tool", "teach yourself to use our API", "edit the custom tool's url", "a reusable tool for checking stock levels", "I want you to be able to call our booking API"},
		Description: "Create, list, update or delete HTTP tools in the custom group (admins only).",
		// A tool made here can send anything anywhere, with the secrets
		// its headers name: making or changing one is as grave as what
		// it may do.
		EffectFor: tools.By(func(_ context.Context, in input) tools.Effect {
			if in.Action == "list" {
				return tools.EffectRead
			}
			return tools.EffectDestructive
		}),
		Summarize: tools.By(m.summarize),
		Timeout:   20 * time.Second,
	}, func(ctx context.Context, in input) (any, error) {
		if !m.admitted(ctx) {
			return nil, &tools.Error{Code: tools.CodePermission, Message: "Only the operator's admins (tools.admins) can manage custom tools."}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		specs, err := m.store.CustomTools(ctx)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(specs, func(s Spec) bool { return s.Name == in.Name })
		switch in.Action {
		case "list":
			if specs == nil {
				specs = []Spec{}
			}
			return map[string]any{"tools": specs}, nil
		case "delete":
			if in.Name == "" {
				return nil, tools.MissingParameter("custom_tools", "delete", "name")
			}
			if i < 0 {
				return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("There is no custom tool '%s'.", in.Name)}
			}
			if _, err := m.store.DeleteCustomTool(ctx, in.Name); err != nil {
				return nil, err
			}
			if err := m.install(slices.Delete(specs, i, i+1)); err != nil {
				return nil, err
			}
			return map[string]any{"status": "deleted", "name": in.Name}, nil
		case "create", "update":
			if in.Name == "" {
				return nil, tools.MissingParameter("custom_tools", in.Action, "name")
			}
			if in.Action == "create" && i >= 0 {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("name: '%s' exists already.", in.Name), Suggestion: "Use update, or another name."}
			}
			if in.Action == "update" && i < 0 {
				return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("There is no custom tool '%s'.", in.Name)}
			}
			s := Spec{Name: in.Name}
			if i >= 0 {
				s = specs[i]
			}
			merge(&s, in)
			if err := m.validate(s); err != nil {
				return nil, err
			}
			next := slices.Clone(specs)
			if i >= 0 {
				next[i] = s
			} else {
				next = append(next, s)
			}
			if err := m.install(next); err != nil {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: strings.TrimPrefix(err.Error(), "tools: "),
					Suggestion: "Fix the named field and try again."}
			}
			if err := m.store.SaveCustomTool(ctx, s, tools.CallerFrom(ctx).UserKey); err != nil {
				m.install(specs) // back to what is stored
				return nil, err
			}
			return map[string]any{"status": in.Action + "d", "name": s.Name,
				"note": "Load the custom group to use it; chats that loaded it get the new version on their next message."}, nil
		}
		return nil, tools.UnknownAction("custom_tools", in.Action, "create", "list", "update", "delete")
	})
}

// summarize says what a call makes: the tool's name and, for create and
// update, the method, URL and header names it will have, and the
// environment variables its headers send.
func (m *Manager) summarize(ctx context.Context, in input) string {
	switch in.Action {
	case "delete":
		return fmt.Sprintf("Delete the custom tool '%s'", in.Name)
	case "create", "update":
	default:
		return ""
	}
	s := Spec{Name: in.Name}
	if in.Action == "update" {
		if specs, err := m.store.CustomTools(ctx); err == nil {
			if i := slices.IndexFunc(specs, func(x Spec) bool { return x.Name == in.Name }); i >= 0 {
				s = specs[i]
			}
		}
	}
	merge(&s, in)
	verb := "Create"
	if in.Action == "update" {
		verb = "Change"
	}
	out := fmt.Sprintf("%s the custom tool '%s': %s %s", verb, s.Name, s.HTTP.Method, s.HTTP.URL)
	if len(s.HTTP.Headers) > 0 {
		names := slices.Sorted(maps.Keys(s.HTTP.Headers))
		var vars []string
		for _, n := range names {
			vars = append(vars, envVar().FindAllString(s.HTTP.Headers[n], -1)...)
		}
		out += " with the headers " + strings.Join(names, ", ")
		if len(vars) > 0 {
			out += ", which send " + strings.Join(vars, ", ")
		}
	}
	if s.Effect != "" {
		out += fmt.Sprintf(" (declared %s)", s.Effect)
	}
	return out
}

// envVar finds ${VAR} references in a header value.
var envVar = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`) })

// merge applies the fields in gives to s.
func merge(s *Spec, in input) {
	if in.Description != "" {
		s.Description = in.Description
	}
	if in.Parameters != nil {
		s.Parameters, _ = json.Marshal(in.Parameters) // decoded from JSON: it encodes
	}
	if in.Method != "" {
		s.HTTP.Method = in.Method
	}
	if in.URL != "" {
		s.HTTP.URL = in.URL
	}
	if in.Headers != nil {
		s.HTTP.Headers = in.Headers
	}
	if in.ReadOnly {
		s.ReadOnly = true
	}
	if in.Effect != "" {
		s.Effect = in.Effect
	}
}

// validate checks a spec; each error names its field.
func (m *Manager) validate(s Spec) error {
	bad := func(field, format string, a ...any) error {
		return &tools.Error{Code: tools.CodeInvalidArgument, Message: field + ": " + fmt.Sprintf(format, a...),
			Suggestion: "Fix " + field + " and call custom_tools again."}
	}
	switch {
	case strings.TrimSpace(s.Description) == "":
		return bad("description", "is required")
	case s.HTTP.Method != "GET" && s.HTTP.Method != "POST":
		return bad("method", "must be GET or POST")
	}
	u, err := url.Parse(s.HTTP.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url", "must be an http(s) URL, got %q", s.HTTP.URL)
	}
	if m.check != nil {
		if err := m.check(u); err != nil {
			return bad("url", "%v", err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.HTTP.Headers)) {
		v := strings.TrimSpace(s.HTTP.Headers[k])
		if !envRef().MatchString(v) {
			return bad("headers."+k, "must be a ${VAR} reference to the operator's environment; secrets are never taken from a chat")
		}
		if err := m.mayCarry(v[2:len(v)-1], u.Hostname()); err != nil {
			return bad("headers."+k, "%v", err)
		}
	}
	if len(s.Parameters) > 0 {
		var schema map[string]any
		if json.Unmarshal(s.Parameters, &schema) != nil || schema["type"] != "object" {
			return bad("parameters", "must be a JSON Schema object with \"type\": \"object\"")
		}
	}
	return nil
}

// Register adds the custom_tools group and the tools chats made earlier.
func (m *Manager) Register(ctx context.Context) error {
	if err := m.reg.AddGroup(m.Group(), m.Tool()); err != nil {
		return err
	}
	if err := m.Load(ctx); err != nil {
		return fmt.Errorf("custom tools: %w", err)
	}
	return nil
}
