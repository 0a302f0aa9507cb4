package tools

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// FindToolsName is the core tool that searches the catalog.
const FindToolsName = "find_tools"

// LoadShare is how close to the best match's score a result must come
// for find_tools with load to load its group.
const LoadShare = 0.9

type findInput struct {
	Query string `json:"query" desc:"the task, in a few words"`
	Limit int    `json:"limit,omitempty"`
	Load  bool   `json:"load,omitempty" desc:"load their groups too"`
}

// FindTools returns find_tools: the model describes what it wants to do
// and gets the tools that fit best (see searchIndex for the ranking);
// with load it also loads the groups of those close to the best,
// recorded like load_tool_group (the engine reads the loaded groups
// from Result.Groups). Disabled tools and groups the caller may not load
// are never returned. The index follows the registry's changes.
func FindTools(r *Registry) Tool { return FindToolsByMeaning(r, nil) }

// FindToolsByMeaning is FindTools ranking by meaning too, with e (nil:
// by words only): the request's vector is compared with each tool's (its
// name, description and examples, embedded when the registry changes),
// and the two rankings are blended (see searchIndex.search). When e
// fails the tools are ranked by words, and e is not asked again for a
// minute.
func FindToolsByMeaning(r *Registry, e Embedder) Tool {
	ix := &searchIndex{reg: r, meaning: meaningIndex{emb: e}}
	return New(Definition{
		Name:        FindToolsName,
		Description: "Find the tools for a task.",
		ReadOnly:    true,
		Timeout:     5 * time.Second,
	}, func(ctx context.Context, in findInput) (any, error) {
		q := strings.TrimSpace(in.Query)
		if q == "" {
			return nil, &Error{Code: CodeMissingParameter, Message: "Required parameter 'query' is missing.",
				Suggestion: "Describe the task in a few words, e.g. 'move a calendar event'.", Details: map[string]any{"required_param": "query"}}
		}
		limit := in.Limit
		if limit <= 0 || limit > 20 {
			limit = 5
		}
		caller := CallerFrom(ctx)
		admitted := map[string]bool{} // each group asked once a call
		sims := ix.nearest(ctx, q)
		hits := ix.search(q, sims, func(name, group string) bool {
			if caller.Disabled[name] {
				return false
			}
			if group == "" {
				return true
			}
			ok, asked := admitted[group]
			if !asked {
				g, found := r.Group(group)
				ok = found && (g.Admit == nil || g.Admit(ctx))
				admitted[group] = ok
			}
			return ok
		}, limit)
		if len(hits) == 0 {
			return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("No tool fits '%s'.", q),
				Suggestion: "Describe the task differently, or tell the person it cannot be done here."}
		}
		var b strings.Builder
		var groups, confident []string
		for _, h := range hits {
			where := h.group
			if where == "" {
				where = "core"
			} else if !slices.Contains(groups, h.group) {
				groups = append(groups, h.group)
			}
			// Only a group whose tool scores close to the best is
			// loaded: every schema loaded costs tokens on every turn.
			if h.group != "" && h.score >= LoadShare*hits[0].score && !slices.Contains(confident, h.group) {
				confident = append(confident, h.group)
			}
			fmt.Fprintf(&b, "- %s (%s): %s\n", h.name, where, h.desc)
		}
		out := strings.TrimRight(b.String(), "\n")
		if in.Load {
			// A group that prepares itself for a load (lists its tools,
			// asks the person) does so here too; one that refuses is not
			// loaded.
			var refused []string
			confident = slices.DeleteFunc(confident, func(name string) bool {
				g, _ := r.Group(name)
				if g.Prepare != nil && g.Prepare(ctx) != nil {
					refused = append(refused, name)
					return true
				}
				return false
			})
			if len(refused) > 0 {
				out += "\nNot loaded, as they could not be loaded now: " + strings.Join(refused, ", ") + "; load_tool_group says why."
			}
		}
		if in.Load && len(confident) > 0 {
			sort.Strings(confident)
			out += "\nLoaded groups: " + strings.Join(confident, ", ") + ". Their tools are available now."
			if len(confident) < len(groups) {
				out += fmt.Sprintf(" Not loaded, as their tools matched less well (under %d%% of the best match): %s; load one with load_tool_group if it is needed.",
					int(LoadShare*100), strings.Join(slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return slices.Contains(confident, g) }), ", "))
			}
			return loaded{text: out, groups: LoadChanges(confident...)}, nil
		}
		if len(groups) > 0 {
			out += "\nLoad a group with load_tool_group (or call find_tools with load: true) before using its tools."
		}
		return out, nil
	})
}

// loaded is the answer of a call that changed the session's groups
// (load_tool_group, unload_tool_group, find_tools with load): the
// executor turns it into a result carrying the changes.
type loaded struct {
	text   string
	groups []GroupChange
}
