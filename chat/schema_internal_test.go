package chat

import (
	"context"
	"strings"
	"testing"

	"loadout/tools"
)

// A group replaced at run time (an MCP server's new tool list) is
// estimated again: the estimates are per registry version, not per name.
func TestSchemaEstimatesFollowAReplacedGroup(t *testing.T) {
	reg := tools.NewRegistry()
	tool := func(desc string) tools.Tool {
		return tools.New(tools.Definition{Name: "remote_do", Description: desc},
			func(context.Context, struct{}) (any, error) { return nil, nil })
	}
	g := tools.Group{Name: "remote", Description: "A remote server"}
	if err := reg.AddGroup(g, tool("short")); err != nil {
		t.Fatal(err)
	}
	e := New(Config{}, nil, nil, reg)
	before := e.schemaTokens(reg.GroupTools("remote", nil))
	if err := reg.ReplaceGroup(g, tool(strings.Repeat("a much longer description ", 40))); err != nil {
		t.Fatal(err)
	}
	if after := e.schemaTokens(reg.GroupTools("remote", nil)); after <= before+100 {
		t.Fatalf("the replaced tool is still estimated at %d tokens (before %d)", after, before)
	}
}
