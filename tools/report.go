package tools

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Costs are what the tool schemas cost a request: what `loadout tools`
// prints.
type Costs struct {
	Groups      []GroupCost
	CoreTools   []string
	CoreTokens  int
	Listing     int
	AllTokens   int
	AllTools    int
	GroupsTotal int // core schemas + listing: the first turn's payload
}

// GroupCost is one group's tools and their schema tokens.
type GroupCost struct {
	Name   string
	Tools  int
	Tokens int
}

// Report counts reg's schemas with count.
func Report(reg *Registry, count func(string) int) Costs {
	var r Costs
	schema := func(defs []Definition) int { return SchemaTokens(defs, count) }
	for _, g := range reg.Groups() {
		defs := reg.GroupTools(g.Name, nil)
		r.Groups = append(r.Groups, GroupCost{g.Name, len(defs), schema(defs)})
	}
	core := reg.Core(nil)
	for _, d := range core {
		r.CoreTools = append(r.CoreTools, d.Name)
	}
	r.CoreTokens = schema(core)
	r.Listing = count(reg.Listing(nil))
	all := reg.All(nil)
	r.AllTools, r.AllTokens = len(all), schema(all)
	r.GroupsTotal = r.CoreTokens + r.Listing
	return r
}

// Write prints the costs as a table and the first turn's payload.
func (r Costs) Write(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOOLS\tSCHEMA TOKENS\t")
	gs := append([]GroupCost(nil), r.Groups...)
	sort.Slice(gs, func(i, j int) bool { return gs[i].Name < gs[j].Name })
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", g.Name, g.Tools, Thousands(g.Tokens))
	}
	fmt.Fprintf(tw, "core (always sent)\t%d\t%s\t\n", len(r.CoreTools), Thousands(r.CoreTokens))
	fmt.Fprintf(tw, "group listing (system prompt)\t\t%s\t\n", Thousands(r.Listing))
	tw.Flush()
	fmt.Fprintf(out, "\nCore tools: %s\n\n", strings.Join(r.CoreTools, ", "))
	fmt.Fprintf(out, "First-turn tool payload:\n")
	fmt.Fprintf(out, "  routing: groups  %s tokens (core schemas %s + listing %s)\n",
		Thousands(r.GroupsTotal), Thousands(r.CoreTokens), Thousands(r.Listing))
	fmt.Fprintf(out, "  routing: all     %s tokens (%d schemas)\n", Thousands(r.AllTokens), r.AllTools)
	if r.GroupsTotal > 0 {
		fmt.Fprintf(out, "  ratio            all is %.1fx groups; groups sends %.1f%% of all\n",
			float64(r.AllTokens)/float64(r.GroupsTotal), 100*float64(r.GroupsTotal)/float64(r.AllTokens))
	}
	fmt.Fprintln(out, "Tokens are counted with o200k_base on each tool's JSON function schema.")
}

// Thousands renders n with comma separators: 12,345.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
