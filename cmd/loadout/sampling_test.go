package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store"
	"loadout/tools/mcp/mcptest"
)

// One call of an MCP server's tool whose result asks for ten samplings
// at once (the SDK fulfils them in parallel) stays within the person's
// daily cap, however much each answer would take: each request is
// reserved before it reaches the model, so no more run than the cap has
// room for, what the person spent in the store, turns and samplings
// together, is within it, and the call's result says which cap.
func TestMCPServerSamplingAtOnceStaysWithinTheCap(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("limits:\n  daily_tokens_per_person: 600\nmcp:\n  servers:\n    - name: calc\n      command: %s\n      args: [\"-test.run=^$\"]\n      env:\n        %s: \"1\"\n", exe, mcptest.EnvVar)
	cfgPath, dbPath := writeConfig(t, model.URL, extra)
	model.Call("load_tool_group", `{"group_name":"mcp_calc"}`)
	model.Text("Loaded.")
	model.Call("calc_summarize", `{"text":"tides"}`)
	model.Text("Tides rise and fall.") // the sampling, which the person allows
	model.Text("Summarized.")
	model.Call("calc_fan_out", `{"count":10}`)
	// Then: each sampling answers slowly with all the tokens it may
	// have; the turn's own calls with a few.
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		if last := req.Messages[len(req.Messages)-1]; strings.HasPrefix(last.Content, "Sample ") {
			return chattest.Step{Text: "an answer", Delay: 200 * time.Millisecond, Usage: chat.Usage{PromptTokens: 1, CompletionTokens: req.MaxTokens}}
		}
		return chattest.Step{Text: "Done."}
	}
	out, err := runCLI(t, "load the calc tools\nsummarize tides\nAllow\nsample ten times\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Summarized.") {
		t.Fatalf("%v\n%s", err, out)
	}
	sampled := 0
	for _, r := range model.Requests() {
		if m := r.Messages[len(r.Messages)-1]; strings.HasPrefix(m.Content, "Sample ") {
			sampled++
		}
	}
	db, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spent, err := db.SpendOver(context.Background(), store.SpendQuery{UserKey: "console:local"})
	if err != nil {
		t.Fatal(err)
	}
	if result := lastToolResult(model); sampled == 10 || spent.Tokens() > 600 || !strings.Contains(result, "(limits.daily_tokens_per_person)") {
		t.Fatalf("%d of the 10 samplings reached the model; the person spent %d tokens against a cap of 600; the model read %s", sampled, spent.Tokens(), result)
	}
}
