package console_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/console"
	"loadout/chat/chattest"
)

func TestConsoleREPL(t *testing.T) {
	env := chattest.NewEnv(t, chattest.Options{})
	env.Model.Text("Hello from the model.")
	var out bytes.Buffer
	c := console.New(console.Config{
		In:   strings.NewReader("hi there\n\n/status\n/help\n/quit\nnot read\n"),
		Out:  &out,
		User: "ana",
	}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"Hello from the model.", "Messages: 2", "you> ", "/quit — leave the console"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := len(env.Model.Requests()); n != 1 {
		t.Errorf("model calls = %d, want 1 (blank line, /status, /help and /quit are not messages)", n)
	}
	if c.ChatKey() != "console:ana" {
		t.Errorf("chat key = %s", c.ChatKey())
	}
	sess, _ := env.Store.OpenSession(context.Background(), "console:ana")
	if sess.Messages != 2 {
		t.Errorf("persisted %d messages under console:ana", sess.Messages)
	}
}
