package chat

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"loadout/tools"
)

// keepBudget keeps the loaded groups' schemas within Config.CatalogBudget
// tokens after a round that changed them: the least recently used groups
// are unloaded first, never one the round itself loaded. The unloads are
// recorded with the round's last group change, msgs[at], whose result
// also tells the model which groups went.
func (t *turn) keepBudget(msgs []Message, at int) {
	e := t.e
	budget := e.cfg.CatalogBudget
	if budget <= 0 || e.cfg.Routing == RoutingAll {
		return
	}
	sizes := make(map[string]int, len(t.loaded))
	total := 0
	for _, g := range t.loaded {
		sizes[g] = e.schemaTokens(e.reg.GroupTools(g, t.settings.Disabled))
		total += sizes[g]
	}
	if total <= budget {
		return
	}
	// When each group was last used: loaded, or one of its tools called
	// successfully. Groups not seen in the history window are the oldest.
	lastUse := map[string]int{}
	fresh := map[string]bool{}
	note := func(i int, m Message, round bool) {
		if m.Role != RoleTool || m.Status != tools.StatusSuccess {
			return
		}
		if tl, ok := e.reg.Tool(m.ToolName); ok && tl.Group != "" {
			lastUse[tl.Group] = i
		}
		for _, c := range m.Groups {
			if !c.Unload {
				lastUse[c.Name] = i
				fresh[c.Name] = fresh[c.Name] || round
			}
		}
	}
	for i, m := range t.history {
		note(i, m, false)
	}
	for i, m := range msgs {
		note(len(t.history)+i, m, true)
	}
	// In load order, so a stable sort leaves ties in it.
	candidates := slices.DeleteFunc(slices.Clone(t.loaded), func(g string) bool { return fresh[g] })
	slices.SortStableFunc(candidates, func(a, b string) int {
		ua, oka := lastUse[a]
		ub, okb := lastUse[b]
		if !oka {
			ua = -1
		}
		if !okb {
			ub = -1
		}
		return cmp.Compare(ua, ub)
	})
	var gone []string
	var changes []tools.GroupChange
	for _, g := range candidates {
		if total <= budget {
			break
		}
		total -= sizes[g]
		gone = append(gone, g)
		changes = append(changes, tools.GroupChange{Name: g, Unload: true})
	}
	if len(gone) == 0 {
		return
	}
	t.loaded = tools.ApplyGroupChanges(t.loaded, changes)
	m := &msgs[at]
	m.Groups = append(m.Groups, changes...)
	m.Text += fmt.Sprintf("\n\nUnloaded to keep the loaded tools within the budget of %d tokens (least recently used first): %s. Load them again if you need them.",
		budget, strings.Join(gone, ", "))
	m.Tokens = e.countMessage(*m)
}
