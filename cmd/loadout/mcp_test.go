package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"loadout/chat/chattest"
	"loadout/tools/mcp/mcptest"
)

// In `loadout chat` an MCP server run over stdio (this test binary,
// serving the test server) is the group mcp_calc: find_tools finds its
// tool and loads the group, the tool runs in the subprocess, and the
// config's ${VAR} reached the server's environment.
func TestMCPServerInTheConsole(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: calc\n      command: %s\n      args: [\"-test.run=^$\"]\n      env:\n        %s: ${TEST_FLAG}\n", exe, mcptest.EnvVar)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	model.Call("find_tools", `{"query":"add two numbers","load":true}`)
	model.Call("calc_add", `{"a":40,"b":2}`)
	model.Text("It is 42.")
	out, err := runCLIEnv(t, "what is 40 + 2?\n/status\n", map[string]string{"TEST_FLAG": "1"}, "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "It is 42.") {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := model.Requests()
	if sys := chattest.System(reqs[0]); !strings.Contains(sys, "- mcp_calc: Arithmetic and odd jobs for tests.") {
		t.Errorf("listing lacks the MCP group:\n%s", sys)
	}
	if got := reqs[1].Messages[len(reqs[1].Messages)-1].Content; !strings.Contains(got, "calc_add (mcp_calc)") || !strings.Contains(got, "Loaded groups: mcp_calc") {
		t.Errorf("find_tools = %s", got)
	}
	if got := lastToolResult(model); !strings.HasPrefix(got, "40 + 2 = 42") {
		t.Errorf("calc_add = %s", got)
	}
	if !strings.Contains(out, "mcp_calc") {
		t.Errorf("/status does not show the loaded MCP group:\n%s", out)
	}
}
