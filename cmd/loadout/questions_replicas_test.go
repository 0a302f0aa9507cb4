package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/store"
	"loadout/tools/mcp/mcptest"
)

// replicas starts n `loadout serve` processes on one PostgreSQL schema
// (LOADOUT_TEST_DSN) in Telegram webhook mode, each with the test MCP
// server as group mcp_calc, and returns their HTTP addresses once they
// are ready.
func replicas(t *testing.T, n int, tg *telegramtest.Server, model *chattest.ModelServer) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dsn, err := store.TestDSN(dir)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for r := range n {
		addr := bridgetest.FreeAddr(t)
		addrs = append(addrs, addr)
		cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  driver: postgres\n  dsn: %q\n  path: %s\n"+
			"http:\n  listen: %s\n  shutdown_grace: 2s\nlog:\n  level: warn\n"+
			"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [42]\n  mode: webhook\n"+
			"  webhook_url: https://bot.example.com/telegram/hook\n  webhook_secret: s3cret\n"+
			"mcp:\n  servers:\n    - name: calc\n      command: %s\n      args: [\"-test.run=^$\"]\n      env:\n        %s: \"1\"\n",
			model.URL, dsn, filepath.Join(dir, fmt.Sprint(r), "loadout.db"), addr, telegramtest.Token, tg.Endpoint(), exe, mcptest.EnvVar)
		path := filepath.Join(dir, fmt.Sprintf("config-%d.yaml", r))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=serve -config "+path)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		})
	}
	for _, addr := range addrs {
		// A first start migrates the schema and starts the MCP server:
		// slower than a test's usual wait on a busy machine.
		deadline := time.Now().Add(time.Minute)
		for {
			res, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never became ready", addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return addrs
}

// hook posts a Telegram update to the webhook of the process at addr,
// as a load balancer would send it there.
func hook(t *testing.T, addr string, update []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/telegram/hook", bytes.NewReader(update))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the webhook of %s answered %d", addr, res.StatusCode)
	}
}

// Found by measuring two replicas: an MCP server's sampling request
// ("Allow everything to use the model?") was asked by the process that
// ran the turn, the person's answer reached the other process, and the
// tool timed out after a minute. Two `loadout serve` processes on one
// PostgreSQL database behind a balancer: an elicitation asked by the
// first — its Accept button, a plain question (the name, typed), a
// question of choices (the colour, a button) — is answered through the
// second, and the sampling allowance asked by the second is answered
// through the first. The server gets the answers, and the model only
// what the server returns.
func TestQuestionsAcrossReplicasOnPostgres(t *testing.T) {
	if os.Getenv(store.TestDSNVar) == "" {
		t.Skip("set " + store.TestDSNVar + " to a PostgreSQL server to run this")
	}
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	addrs := replicas(t, 2, tg, model)
	first, second := addrs[0], addrs[1]
	ana := telegramtest.User{ID: 42, UserName: "ana"}
	say := func(addr, text string) {
		_, u := tg.Update(telegramtest.Message{From: ana, Text: text})
		hook(t, addr, u)
	}
	press := func(addr string, q telegramtest.Sent, button int) {
		_, u := tg.ClickUpdate(ana, 42, 0, q.MessageID, q.Buttons[button].Data)
		hook(t, addr, u)
	}
	// sentWith waits for the n-th message the bot sent and checks it.
	sentWith := func(n int, want string) telegramtest.Sent {
		t.Helper()
		s := tg.WaitSent(t, n)[n-1]
		if !strings.Contains(s.Text, want) {
			t.Fatalf("message %d is %q, not about %q", n, s.Text, want)
		}
		return s
	}

	// The group is loaded in a turn of its own (a turn that loads it has
	// read the server's text, and its calls would wait for approval).
	model.Call("load_tool_group", `{"group_name":"mcp_calc"}`)
	model.Text("Loaded.")
	say(first, "load the calc tools")
	sentWith(1, "Loaded.")

	model.Call("calc_ask_name", `{}`)
	model.Text("Nice to meet you.")
	say(first, "ask my name")
	form := sentWith(2, "What should I call you?")
	if len(form.Buttons) != 3 || form.Buttons[0].Text != "Accept" {
		t.Fatalf("the form's question has buttons %+v", form.Buttons)
	}
	press(second, form, 0)
	sentWith(3, "Name")
	say(second, "Ada")
	sentWith(4, "Age")
	say(second, "-")
	colour := sentWith(5, "Colour")
	press(second, colour, 1)
	sentWith(6, "Nice to meet you.")
	if got := lastToolResult(model); !strings.Contains(got, `"name":"Ada"`) || !strings.Contains(got, `"color":"green"`) {
		t.Fatalf("the server got %s", got)
	}

	model.Call("calc_summarize", `{"text":"a long story"}`)
	model.Text("A short story.") // the server's sampling request
	model.Text("Summarised.")
	say(second, "summarize the story")
	allow := sentWith(7, "asks to use the model on your behalf")
	if len(allow.Buttons) != 2 || allow.Buttons[0].Text != "Allow" {
		t.Fatalf("the allowance's question has buttons %+v", allow.Buttons)
	}
	began := time.Now()
	press(first, allow, 0)
	sentWith(8, "Summarised.")
	if got := lastToolResult(model); !strings.Contains(got, "A short story.") {
		t.Fatalf("the tool returned %s", got)
	}
	// Well within the minute a lost answer used to take.
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the allowance took %s to reach the turn", d)
	}
}
