package mcp

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"loadout/chat/chattest"
	"loadout/tools/mcp/mcptest"
)

// A stdio server that prints the token of its environment to its
// stderr, logged through a logger that redacts nothing: the line is
// logged, the token is not. A line cut to length inside a credential
// the server was given (one of its arguments here) keeps no part of it.
func TestStdioServersStderrHoldsNoSecretItWasGiven(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const token, argKey = "stdio-server-token-5c1f", "arg-api-key-4471d0e9"
	var buf chattest.LogBuffer
	c := New(Server{Name: "proc", Command: exe, Args: []string{"-test.run=^$", "--api-key", argKey},
		Env: map[string]string{mcptest.EnvVar: "1", mcptest.TokenVar: token}}, Deps{}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err := Register(context.Background(), newRegistry(t), c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), "signed in with token") {
		if time.Now().After(deadline) {
			t.Fatalf("the server's stderr was not logged:\n%s", buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, cmd := c.transport()
	cmd.Stderr.Write([]byte(strings.Repeat("x", 490) + " " + argKey + "\n"))
	out := buf.String()
	for _, leak := range []string{token, argKey[:6]} {
		if strings.Contains(out, leak) {
			t.Errorf("the log shows %q:\n%s", leak, out)
		}
	}
}
