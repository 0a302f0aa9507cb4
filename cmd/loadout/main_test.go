package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"loadout/chat/chattest"
	"loadout/settings"
	"loadout/store"
	"loadout/tools"
)

// writeConfig writes a config that points at the fake model and a temp DB.
func writeConfig(t *testing.T, modelURL, extra string) (path, dbPath string) {
	t.Helper()
	dir := t.TempDir()
	dbPath = filepath.Join(dir, "data", "loadout.db")
	path = filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: ${TEST_KEY}\n  model: fake\nstore:\n  path: %s\nlog:\n  level: error\n%s", modelURL, dbPath, extra)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dbPath
}

func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	return runCLIEnv(t, stdin, nil, args...)
}

// runCLIEnv is runCLI with more environment variables.
func runCLIEnv(t *testing.T, stdin string, vars map[string]string, args ...string) (string, error) {
	t.Helper()
	m := map[string]string{"TEST_KEY": "sk-test"}
	maps.Copy(m, vars)
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut, env(m))
	return out.String() + errOut.String(), err
}

func TestChatCommandEndToEnd(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "")

	model.Call("load_tool_group", `{"group_name":"config"}`)
	model.Call("agent_config", `{"action":"update","field":"name","value":"Ada"}`)
	model.Text("I'm Ada now.")
	out, err := runCLI(t, "call yourself Ada\n/status\n", "-config", cfgPath, "chat")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"I'm Ada now.", "Loaded tool groups: config", "Messages: 6"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	reqs := model.Requests()
	if got := chattest.ToolNames(reqs[0]); !slices.Equal(got, []string{"load_tool_group", "unload_tool_group", "find_tools", "get_current_time", "delegate", "memory", "web"}) {
		t.Errorf("first request tools = %v", got)
	}

	// A second process on the same store: the group is still loaded and
	// the per-chat name is applied on the very first request.
	model.Text("Still here.")
	out, err = runCLI(t, "hello\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Still here.") {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	first := model.Last(t)
	if !slices.Contains(chattest.ToolNames(first), "agent_config") || !strings.Contains(chattest.System(first), "Your name is Ada.") {
		t.Errorf("restart lost state: tools=%v system=%q", chattest.ToolNames(first), chattest.System(first))
	}

	// /clear in the console closes the session for the next run too.
	out, _ = runCLI(t, "/clear\n", "-config", cfgPath, "chat")
	if !strings.Contains(out, "new conversation") {
		t.Fatalf("clear: %s", out)
	}
	model.Text("Fresh.")
	runCLI(t, "hi\n", "-config", cfgPath, "chat")
	if got := chattest.ToolNames(model.Last(t)); !slices.Equal(got, []string{"load_tool_group", "unload_tool_group", "find_tools", "get_current_time", "delegate", "memory", "web"}) {
		t.Errorf("after /clear tools = %v", got)
	}
}

func TestChatNeedsAPIKeyOnlyForOpenAI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfgPath, []byte("llm:\n  api_key: ${TEST_KEY:-}\nstore:\n  path: "+filepath.Join(dir, "x.db")+"\n"), 0o600)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-config", cfgPath, "chat"}, strings.NewReader(""), &out, &out, env(nil))
	if err == nil || !strings.Contains(err.Error(), "llm.api_key") {
		t.Fatalf("err = %v", err)
	}
	// A local server needs no key.
	model := chattest.NewModelServer(t)
	local, _ := writeConfig(t, model.URL, "")
	model.Text("no key needed")
	out.Reset()
	err = run(context.Background(), []string{"chat", "-config", local}, strings.NewReader("hi\n"), &out, &out, env(map[string]string{"TEST_KEY": ""}))
	if err == nil || !strings.Contains(err.Error(), "TEST_KEY") {
		t.Fatalf("an unset ${TEST_KEY}: %v", err)
	}
	os.WriteFile(local, bytes.Replace(must(os.ReadFile(local)), []byte("${TEST_KEY}"), []byte("${TEST_KEY:-}"), 1), 0o600)
	out.Reset()
	if err := run(context.Background(), []string{"chat", "-config", local}, strings.NewReader("hi\n"), &out, &out, env(nil)); err != nil || !strings.Contains(out.String(), "no key needed") {
		t.Fatalf("local model without a key: %v\n%s", err, out.String())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestToolsCommandPrintsTotals(t *testing.T) {
	cfgPath, _ := writeConfig(t, "http://127.0.0.1:1/v1", "")
	out, err := runCLI(t, "", "-config", cfgPath, "tools")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"config", "core (always sent)", "routing: groups", "routing: all", "ratio", "o200k_base"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestToolReportArithmetic(t *testing.T) {
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	r := tools.Report(a.reg, a.tokens.Count)
	sum := r.CoreTokens
	tools := len(r.CoreTools)
	for _, g := range r.Groups {
		sum += g.Tokens
		tools += g.Tools
	}
	if sum != r.AllTokens || tools != r.AllTools || r.GroupsTotal != r.CoreTokens+r.Listing || r.Listing == 0 {
		t.Fatalf("report does not add up: %+v", r)
	}
}

func TestServeHealthzAndShutdown(t *testing.T) {
	a, ln := bareApp(t)
	stop := startRun(t, a, ln, nil)
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("healthz = %d %q", resp.StatusCode, body)
	}
	stop()
}

func TestManifestGroupsAreRegistered(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "weather.json"), []byte(`[{"_meta":true,"display_name":"Weather","description":"Forecasts"},
	  {"name":"weather_now","description":"Now","http":{"url":"http://127.0.0.1:1/now"}}]`), 0o600)
	cfgPath, _ := writeConfig(t, "http://127.0.0.1:1/v1", "tools:\n  manifests_dir: "+dir+"\n")
	out, err := runCLI(t, "", "-config", cfgPath, "tools")
	if err != nil || !strings.Contains(out, "weather") {
		t.Fatalf("tools output: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "clash.json"), []byte(`[{"name":"weather_now","description":"again","http":{"url":"http://127.0.0.1:1/x"}}]`), 0o600)
	_, err = runCLI(t, "", "-config", cfgPath, "tools")
	if err == nil || !strings.Contains(err.Error(), "group clash") || !strings.Contains(err.Error(), "group weather") {
		t.Fatalf("collision error = %v", err)
	}
}

// With store.driver postgres (LOADOUT_TEST_DSN names a server) a
// conversation is kept there: a second `loadout chat` finds it.
func TestChatOnPostgres(t *testing.T) {
	if os.Getenv(store.TestDSNVar) == "" {
		t.Skip("set " + store.TestDSNVar + " to a PostgreSQL server to run this")
	}
	model := chattest.NewModelServer(t)
	dir := t.TempDir()
	dsn, err := store.TestDSN(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\n  model: fake\nstore:\n  driver: postgres\n  path: %s\n  dsn: %q\nlog:\n  level: error\n",
		model.URL, filepath.Join(dir, "data", "x.db"), dsn)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	model.Text("Hello, Ana.")
	if out, err := runCLI(t, "my name is Ana\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Hello, Ana.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := runCLI(t, "/status\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Messages: 2") {
		t.Fatalf("second run: %v\n%s", err, out)
	}
}
