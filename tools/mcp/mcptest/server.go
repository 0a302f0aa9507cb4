// Package mcptest is a small MCP server for tests, built with the official
// SDK: in process over its in-memory transport, or as a stdio subprocess
// (a test binary that calls ServeStdio when asked to).
package mcptest

import (
	"context"
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

// NewServer returns the server with its tools: add (read-only), Echo-Text
// (a name loadout must rewrite), fail (answers an error), crash (ends the
// process, for a stdio server) and slow (waits until cancelled).
func NewServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1"}, &sdk.ServerOptions{Instructions: Instructions})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two whole numbers",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, in AddIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%d + %d = %d (pid %d)", in.A, in.B, in.A+in.B, os.Getpid())}}}, nil, nil
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
	return s
}

// EnvVar, set to "1" in a test binary's environment, makes MaybeServe
// serve over stdio and exit.
const EnvVar = "LOADOUT_MCPTEST_SERVER"

// MaybeServe serves the test server over stdin/stdout and exits when the
// environment asks for it (call it first in TestMain); otherwise it
// returns.
func MaybeServe() {
	if os.Getenv(EnvVar) != "1" {
		return
	}
	if err := NewServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
	}
	os.Exit(0)
}
