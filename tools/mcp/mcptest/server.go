// Package mcptest is a small MCP server for tests, built with the official
// SDK: in process over its in-memory transport, or as a stdio subprocess
// (a test binary that calls ServeStdio when asked to).
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Instructions are the server's instructions; their first line becomes
// the group's line when the config gives none.
const Instructions = "Arithmetic and odd jobs for tests.\nSecond line is not shown."

// AddIn is add's input.
type AddIn struct {
	A int `json:"a" jsonschema:"the first number"`
	B int `json:"b" jsonschema:"the second number"`
}

// EchoIn is echo's input.
type EchoIn struct {
	Text string `json:"text" jsonschema:"what to say back"`
}

// FanOutIn is fan_out's input.
type FanOutIn struct {
	Count  int `json:"count" jsonschema:"how many samplings to ask for at once"`
	Rounds int `json:"rounds,omitempty" jsonschema:"how many times to ask; default once"`
}

// NewServer returns the server with its tools: add (read-only), reword
// (changes add's description), Echo-Text
// (a name loadout must rewrite), fail (answers an error), crash (ends the
// process, for a stdio server) and slow (waits until cancelled).
func NewServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1"}, &sdk.ServerOptions{Instructions: Instructions})
	add := func(ctx context.Context, _ *sdk.CallToolRequest, in AddIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%d + %d = %d (pid %d)", in.A, in.B, in.A+in.B, os.Getpid())}}}, nil, nil
	}
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two whole numbers",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, add)
	// reword changes what add says (the server then tells its clients
	// that its tools changed).
	sdk.AddTool(s, &sdk.Tool{Name: "reword", Description: "Change the description of add"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in EchoIn) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(s, &sdk.Tool{Name: "add", Description: in.Text, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, add)
			return text("reworded"), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "Echo-Text", Description: "Say the text back"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in EchoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the disk is full"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Stop the server's process"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Wait until cancelled"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		})
	addAskers(s)
	return s
}

// NameForm is the form ask_name sends: a required name, a colour among
// two, an age in a range.
var NameForm = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"name":  map[string]any{"type": "string", "title": "Name", "description": "What to call you"},
		"color": map[string]any{"type": "string", "title": "Colour", "enum": []any{"red", "green"}},
		"age":   map[string]any{"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
	},
	"required": []any{"name"},
}

// addAskers adds the tools that ask the person through the client:
// ask_name (a form), ask_nested (a schema a chat cannot ask) and pester
// (asks again and again, each answer followed by a new question). They
// use multi round-trip results, which the SDK turns into requests for a
// client of an older protocol.
func addAskers(s *sdk.Server) {
	sdk.AddTool(s, &sdk.Tool{Name: "ask_name", Description: "Ask the person their name"},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["q"].(*sdk.ElicitResult); ok {
				b, _ := json.Marshal(r.Content)
				return text(fmt.Sprintf("%s %s", r.Action, b)), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"q": &sdk.ElicitParams{
				Message: "What should I call you?", RequestedSchema: NameForm}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "ask_nested", Description: "Ask for a nested form"},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["q"].(*sdk.ElicitResult); ok {
				return text("answered " + r.Action), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"q": &sdk.ElicitParams{
				Message: "Your address", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
					"address": map[string]any{"type": "object", "properties": map[string]any{"street": map[string]any{"type": "string"}}},
				}}}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "summarize", Description: "Summarize a text with the client's model"},
		func(ctx context.Context, req *sdk.CallToolRequest, in EchoIn) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["s"].(*sdk.CreateMessageWithToolsResult); ok {
				var t *sdk.TextContent
				if len(r.Content) == 1 {
					t, _ = r.Content[0].(*sdk.TextContent)
				}
				if t == nil {
					return text("no text"), nil, nil
				}
				return text("summary by " + r.Model + ": " + t.Text), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"s": &sdk.CreateMessageParams{
				SystemPrompt: "You summarize.", MaxTokens: 50,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "Summarize: " + in.Text}}}}}}, nil, nil
		})
	// plan samples with a tool of its own (weather): when the model
	// calls it, plan runs it and samples again with the result.
	sdk.AddTool(s, &sdk.Tool{Name: "plan", Description: "Plan a trip with the client's model and the weather tool"},
		func(ctx context.Context, req *sdk.CallToolRequest, in EchoIn) (*sdk.CallToolResult, any, error) {
			weather := &sdk.Tool{Name: "weather", Description: "The weather of a city",
				InputSchema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}
			ask := []*sdk.SamplingMessageV2{{Role: "user", Content: []sdk.Content{&sdk.TextContent{Text: "Plan a trip to " + in.Text}}}}
			params := func(msgs []*sdk.SamplingMessageV2) *sdk.CreateMessageWithToolsParams {
				return &sdk.CreateMessageWithToolsParams{SystemPrompt: "You plan trips.", MaxTokens: 100, Messages: msgs, Tools: []*sdk.Tool{weather},
					ModelPreferences: &sdk.ModelPreferences{Hints: []*sdk.ModelHint{{Name: "planner"}}}}
			}
			if r, ok := req.Params.InputResponses["final"].(*sdk.CreateMessageWithToolsResult); ok {
				var b []byte
				b, _ = json.Marshal(r.Content)
				return text(fmt.Sprintf("plan by %s (%s): %s", r.Model, r.StopReason, b)), nil, nil
			}
			if r, ok := req.Params.InputResponses["first"].(*sdk.CreateMessageWithToolsResult); ok {
				var uses, results []sdk.Content
				for _, c := range r.Content {
					if u, ok := c.(*sdk.ToolUseContent); ok && u.Name == "weather" {
						uses = append(uses, u)
						results = append(results, &sdk.ToolResultContent{ToolUseID: u.ID, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("sunny in %v", u.Input["city"])}}})
					}
				}
				if len(uses) == 0 {
					b, _ := json.Marshal(r.Content)
					return text(fmt.Sprintf("no weather asked (%s): %s", r.StopReason, b)), nil, nil
				}
				msgs := append(ask, &sdk.SamplingMessageV2{Role: "assistant", Content: uses}, &sdk.SamplingMessageV2{Role: "user", Content: results})
				return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"final": params(msgs)}}, nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"first": params(ask)}}, nil, nil
		})
	// fan_out asks for count samplings at once in each of rounds rounds
	// (one by default), as a tool result's input requests, which the
	// client fulfils in parallel.
	sdk.AddTool(s, &sdk.Tool{Name: "fan_out", Description: "Sample many times at once"},
		func(ctx context.Context, req *sdk.CallToolRequest, in FanOutIn) (*sdk.CallToolResult, any, error) {
			done := len(req.Params.RequestState)
			if done >= max(in.Rounds, 1) {
				return text(fmt.Sprintf("%d rounds of %d answers", done, len(req.Params.InputResponses))), nil, nil
			}
			asks := sdk.InputRequestMap{}
			for i := range in.Count {
				asks[fmt.Sprint("s", i)] = &sdk.CreateMessageParams{MaxTokens: 100,
					Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: fmt.Sprint("Sample ", i)}}}}
			}
			return &sdk.CallToolResult{RequestState: req.Params.RequestState + "x", InputRequests: asks}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "ask_url", Description: "Send the person to a link"},
		func(ctx context.Context, req *sdk.CallToolRequest, in EchoIn) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["u"].(*sdk.ElicitResult); ok {
				return text("link " + r.Action), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"u": &sdk.ElicitParams{
				Mode: "url", URL: in.Text, ElicitationID: "e1", Message: "Sign in to the service"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "picture", Description: "Return a picture, a sound and, when asked, a huge picture"},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct {
			Huge bool `json:"huge,omitempty"`
		}) (*sdk.CallToolResult, any, error) {
			content := []sdk.Content{&sdk.TextContent{Text: "Here:"}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG tiny")},
				&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")}}
			if in.Huge {
				content = append(content, &sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 6<<20)})
			}
			return &sdk.CallToolResult{Content: content}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "pester", Description: "Ask question after question"},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			n := len(req.Params.RequestState)
			if n >= 20 {
				return text("asked twenty questions"), nil, nil
			}
			return &sdk.CallToolResult{RequestState: req.Params.RequestState + "x", InputRequests: sdk.InputRequestMap{
				fmt.Sprint("q", n): &sdk.ElicitParams{Message: fmt.Sprintf("Question %d: say yes", n+1),
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}}}, nil, nil
		})
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// EnvVar, set to "1" in a test binary's environment, makes MaybeServe
// serve over stdio and exit.
const EnvVar = "LOADOUT_MCPTEST_SERVER"

// TokenVar is a credential the stdio server is given in its environment:
// it writes it to its stderr when it starts, as careless servers do, so
// a test can see where a server's stderr goes.
const TokenVar = "LOADOUT_MCPTEST_TOKEN"

// MaybeServe serves the test server over stdin/stdout and exits when the
// environment asks for it (call it first in TestMain); otherwise it
// returns.
func MaybeServe() {
	if os.Getenv(EnvVar) != "1" {
		return
	}
	if t := os.Getenv(TokenVar); t != "" {
		fmt.Fprintf(os.Stderr, "mcptest: signed in with token %s\n", t)
	}
	if err := NewServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
	}
	os.Exit(0)
}
