package tools

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Registry holds every tool and group definition. It is built at start-up
// with Add and AddGroup; ReplaceGroup swaps a group's tools at run time
// (tools people create from a chat). It is safe for concurrent use.
type Registry struct {
	mu         sync.RWMutex
	tools      map[string]*entry
	order      []string // registration order, for stable catalogs
	groups     map[string]Group
	groupOrder []string
	members    map[string][]string // group name → tool names
	version    uint64              // counts changes, for indexes of the registry
}

// Version changes whenever a tool or group is added or replaced.
func (r *Registry) Version() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.version
}

type entry struct {
	Tool
	schema *schemaNode
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		tools:   map[string]*entry{},
		groups:  map[string]Group{},
		members: map[string][]string{},
	}
}

// Add registers core tools: tools that belong to no group and are always in
// the catalog. It fails on an invalid or duplicate name, naming both owners.
func (r *Registry) Add(ts ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		t.Group = ""
		if err := r.add(t); err != nil {
			return err
		}
	}
	return nil
}

// AddGroup registers a group and its tools. It fails if the group name is
// invalid or already registered, or if any tool name is invalid or taken.
func (r *Registry) AddGroup(g Group, ts ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addGroup(g, ts...)
}

func (r *Registry) addGroup(g Group, ts ...Tool) error {
	if !validName(g.Name) {
		return fmt.Errorf("tools: group name %q does not match %s", g.Name, namePattern)
	}
	if old, ok := r.groups[g.Name]; ok {
		return fmt.Errorf("tools: group %q registered twice: %q and %q", g.Name, old.DisplayName, g.DisplayName)
	}
	if _, ok := r.tools[g.Name]; ok {
		return fmt.Errorf("tools: group %q collides with the tool of the same name from %s", g.Name, r.owner(g.Name))
	}
	if g.DisplayName == "" {
		g.DisplayName = g.Name
	}
	r.groups[g.Name] = g
	// A replaced group keeps its place, so the listing (and the system
	// prompt that carries it) does not change.
	if !slices.Contains(r.groupOrder, g.Name) {
		r.groupOrder = append(r.groupOrder, g.Name)
	}
	for _, t := range ts {
		t.Group = g.Name
		if err := r.add(t); err != nil {
			return err
		}
	}
	return nil
}

func (r *Registry) add(t Tool) error {
	src := source(t.Group)
	if !validName(t.Name) {
		return fmt.Errorf("tools: tool name %q (%s) does not match %s", t.Name, src, namePattern)
	}
	if t.Name == SamplingRuleTool {
		return fmt.Errorf("tools: tool name %q (%s) is reserved for the rules that let MCP servers use the model", t.Name, src)
	}
	if t.Run == nil {
		return fmt.Errorf("tools: tool %q (%s) has no Run function", t.Name, src)
	}
	if _, ok := r.tools[t.Name]; ok {
		return fmt.Errorf("tools: tool %q from %s collides with the tool of the same name from %s", t.Name, src, r.owner(t.Name))
	}
	if g, ok := r.groups[t.Name]; ok && g.Name != t.Group {
		return fmt.Errorf("tools: tool %q from %s collides with group %q", t.Name, src, g.Name)
	}
	if w := ActingWord(t.Definition); w != "" && t.ReadOnly && t.Effect == EffectRead && t.EffectFor == nil {
		return fmt.Errorf("tools: tool %q (%s) says it will %s but is declared read-only; declare its Effect", t.Name, src, w)
	}
	s, err := compileSchema(t.Parameters)
	if err != nil {
		return fmt.Errorf("tools: tool %q (%s) has an invalid parameter schema: %w", t.Name, src, err)
	}
	if t.Timeout <= 0 {
		t.Timeout = DefaultTimeout
	}
	r.version++
	r.tools[t.Name] = &entry{Tool: t, schema: s}
	r.order = append(r.order, t.Name)
	if t.Group != "" {
		r.members[t.Group] = append(r.members[t.Group], t.Name)
	}
	return nil
}

func (r *Registry) owner(name string) string {
	if e, ok := r.tools[name]; ok {
		return source(e.Group)
	}
	return "unknown"
}

func source(group string) string {
	if group == "" {
		return "core"
	}
	return "group " + group
}

// ReplaceGroup registers group g with tools ts, replacing the group of
// that name and all its tools if there is one, in the same place of the
// listing. Sessions that loaded the group get the new tools on their next
// request. On an error nothing
// changes.
func (r *Registry) ReplaceGroup(g Group, ts ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	saved := r.snapshot()
	at := slices.Index(r.groupOrder, g.Name)
	if at >= 0 {
		for _, n := range r.members[g.Name] {
			delete(r.tools, n)
		}
		r.order = slices.DeleteFunc(r.order, func(n string) bool { return slices.Contains(saved.members[g.Name], n) })
		delete(r.members, g.Name)
		delete(r.groups, g.Name)
	}
	if err := r.addGroup(g, ts...); err != nil {
		r.restore(saved)
		return err
	}
	r.version++
	return nil
}

// registryState is a copy of a registry's maps and lists.
type registryState struct {
	tools      map[string]*entry
	order      []string
	groups     map[string]Group
	groupOrder []string
	members    map[string][]string
}

func (r *Registry) snapshot() registryState {
	members := make(map[string][]string, len(r.members))
	for k, v := range r.members {
		members[k] = slices.Clone(v)
	}
	return registryState{tools: maps.Clone(r.tools), order: slices.Clone(r.order), groups: maps.Clone(r.groups),
		groupOrder: slices.Clone(r.groupOrder), members: members}
}

func (r *Registry) restore(s registryState) {
	r.tools, r.order, r.groups, r.groupOrder, r.members = s.tools, s.order, s.groups, s.groupOrder, s.members
}

// lookup is the entry registered under name.
func (r *Registry) lookup(name string) (*entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	return e, ok
}

// Tool returns the tool registered under name.
func (r *Registry) Tool(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	if !ok {
		return Tool{}, false
	}
	return e.Tool, true
}

// Group returns the group registered under name.
func (r *Registry) Group(name string) (Group, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.groups[name]
	return g, ok
}

// OutsideText reports whether changes load a group whose tools' texts
// are outside text (Group.Untrusted).
func (r *Registry) OutsideText(changes []GroupChange) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, c := range changes {
		if !c.Unload && r.groups[c.Name].Untrusted {
			return true
		}
	}
	return false
}

// Groups returns every group in registration order.
func (r *Registry) Groups() []Group {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Group, len(r.groupOrder))
	for i, n := range r.groupOrder {
		out[i] = r.groups[n]
	}
	return out
}

// GroupNames returns every group name, comma-separated, in registration order.
func (r *Registry) GroupNames() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return strings.Join(r.groupOrder, ", ")
}

// Core returns the definitions of core tools, skipping disabled ones.
func (r *Registry) Core(disabled map[string]bool) []Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.core(disabled)
}

func (r *Registry) core(disabled map[string]bool) []Definition {
	var out []Definition
	for _, n := range r.order {
		if e := r.tools[n]; e.Group == "" && !disabled[n] {
			out = append(out, e.Definition)
		}
	}
	return out
}

// GroupTools returns the definitions in group, skipping disabled ones. An
// unknown group yields nil.
func (r *Registry) GroupTools(group string, disabled map[string]bool) []Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.groupTools(group, disabled)
}

func (r *Registry) groupTools(group string, disabled map[string]bool) []Definition {
	var out []Definition
	for _, n := range r.members[group] {
		if !disabled[n] {
			out = append(out, r.tools[n].Definition)
		}
	}
	return out
}

// All returns every definition, skipping disabled ones.
func (r *Registry) All(disabled map[string]bool) []Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.all(disabled)
}

func (r *Registry) all(disabled map[string]bool) []Definition {
	var out []Definition
	for _, n := range r.order {
		if !disabled[n] {
			out = append(out, r.tools[n].Definition)
		}
	}
	return out
}

// anyEnabled reports whether group has a tool not in disabled.
func (r *Registry) anyEnabled(group string, disabled map[string]bool) bool {
	for _, n := range r.members[group] {
		if !disabled[n] {
			return true
		}
	}
	return false
}

// Listing bounds, in bytes, a name's bytes counted twice (names with
// underscores and digits cost a token every two or three bytes, prose
// one every four): the groups' lines, then the names of the groups that
// did not fit. However many groups there are, the listing stays within
// 240 tokens (TestListingIsBounded).
const (
	listingLines = 760
	listingNames = 60
)

// Listing renders the "## Available Tool Groups" section of the system
// prompt: one line per group that has at least one enabled tool, in
// registration order, while they fit in listingLines; then the names of
// the next ones while they fit in listingNames; then how many more there
// are. It is empty when there is no such group.
func (r *Registry) Listing(disabled map[string]bool) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var b strings.Builder
	lines, names, more := 0, 0, 0
	var spill []string
	for _, n := range r.groupOrder {
		if !r.anyEnabled(n, disabled) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("## Available Tool Groups\n\nLoad a group with load_tool_group before using its tools; find_tools finds tools.\n\n")
		}
		line := fmt.Sprintf("- %s: %s\n", n, r.groups[n].Description)
		switch {
		case names == 0 && lines+len(line)+len(n) <= listingLines:
			lines += len(line) + len(n)
			b.WriteString(line)
		case names+2*len(n)+2 <= listingNames:
			names += 2*len(n) + 2
			spill = append(spill, n)
		default:
			more++
		}
	}
	if len(spill) > 0 {
		fmt.Fprintf(&b, "- Also: %s\n", strings.Join(spill, ", "))
	}
	if more > 0 {
		fmt.Fprintf(&b, "- And %d more groups: find_tools finds their tools.\n", more)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Catalog is the set of tools one session may call on one model request.
type Catalog struct {
	defs   []Definition
	names  map[string]bool
	loaded []string
}

// Catalog builds the active catalog. With all set it holds every enabled
// tool; otherwise the enabled core tools, then the enabled tools of the
// loaded groups in the order of loaded (the order they were loaded in, so
// a new group only appends and the request keeps its cached prefix).
// Unknown group names in loaded are ignored.
func (r *Registry) Catalog(all bool, loaded []string, disabled map[string]bool) *Catalog {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := &Catalog{names: map[string]bool{}}
	if all {
		c.defs = r.all(disabled)
		c.loaded = append([]string(nil), r.groupOrder...)
	} else {
		c.defs = r.core(disabled)
		seen := map[string]bool{}
		for _, g := range loaded {
			if _, ok := r.groups[g]; !ok || seen[g] {
				continue
			}
			seen[g] = true
			c.loaded = append(c.loaded, g)
			c.defs = append(c.defs, r.groupTools(g, disabled)...)
		}
	}
	for _, d := range c.defs {
		c.names[d.Name] = true
	}
	return c
}

// Definitions returns the catalog's tools in a stable order. The slice must
// not be modified.
func (c *Catalog) Definitions() []Definition { return c.defs }

// Has reports whether the catalog holds the named tool.
func (c *Catalog) Has(name string) bool { return c.names[name] }

// Loaded returns the names of the groups in the catalog, in load order.
func (c *Catalog) Loaded() []string { return c.loaded }
