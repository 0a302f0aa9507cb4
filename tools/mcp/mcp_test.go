package mcp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/config"
	"loadout/proc"
	"loadout/proc/proctest"
	"loadout/tools"
	"loadout/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	proc.Serve()
	mcptest.MaybeServe()
	os.Exit(m.Run())
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// inMemory is a transport factory over the SDK's in-memory transport: each
// connection gets a fresh test server. While down is set it fails.
func inMemory(t *testing.T, down *atomic.Bool) func() sdk.Transport {
	return func() sdk.Transport {
		if down != nil && down.Load() {
			return failing{}
		}
		client, server := sdk.NewInMemoryTransports()
		if _, err := mcptest.NewServer().Connect(context.Background(), server, nil); err != nil {
			t.Errorf("server connect: %v", err)
		}
		return client
	}
}

type failing struct{}

func (failing) Connect(context.Context) (sdk.Connection, error) {
	return nil, errors.New("connection refused")
}

func newRegistry(t *testing.T) *tools.Registry {
	reg := tools.NewRegistry()
	if err := reg.Add(tools.LoadGroup(reg), tools.FindTools(reg)); err != nil {
		t.Fatal(err)
	}
	return reg
}

// run calls one tool through the executor, as a turn would.
func run(t *testing.T, reg *tools.Registry, name, args string) tools.Result {
	t.Helper()
	return tools.NewExecutor(reg, quiet).Run(context.Background(), reg.Catalog(true, nil, nil),
		[]tools.Call{{ID: "c1", Name: name, Arguments: args}})[0]
}

func TestServerIsAGroup(t *testing.T) {
	reg := newRegistry(t)
	c := New(Server{Name: "demo", transport: inMemory(t, nil)}, Deps{}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, ok := reg.Group("mcp_demo")
	if !ok || g.Description != "Arithmetic and odd jobs for tests." {
		t.Fatalf("group = %+v, %v", g, ok)
	}
	var names []string
	for _, d := range reg.GroupTools("mcp_demo", nil) {
		names = append(names, d.Name)
	}
	want := []string{"demo_add", "demo_echo_text", "demo_fail", "demo_crash", "demo_slow", "demo_ask_name", "demo_ask_nested", "demo_pester", "demo_summarize", "demo_plan", "demo_fan_out", "demo_reword", "demo_ask_url", "demo_picture"}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	if add, _ := reg.Tool("demo_add"); !add.ReadOnly || !strings.Contains(string(add.Parameters), `"a"`) {
		t.Errorf("demo_add = %+v", add.Definition)
	}
	if r := run(t, reg, "load_tool_group", `{"group_name":"mcp_demo"}`); r.Status != tools.StatusSuccess || !strings.Contains(r.Content, "demo_add: Add two whole numbers") {
		t.Fatalf("load = %+v", r)
	}
	if r := run(t, reg, "demo_add", `{"a":2,"b":3}`); r.Status != tools.StatusSuccess || !strings.HasPrefix(r.Content, "2 + 3 = 5") {
		t.Fatalf("add = %+v", r)
	}
	if r := run(t, reg, "demo_echo_text", `{"text":"hi"}`); r.Content != "echo: hi" {
		t.Fatalf("echo = %+v", r)
	}
	// The server's own schema is checked before the call leaves loadout.
	if r := run(t, reg, "demo_add", `{"a":"two","b":3}`); r.Code != tools.CodeInvalidArgument {
		t.Fatalf("bad argument = %+v", r)
	}
	if r := run(t, reg, "demo_fail", `{}`); r.Code != CodeToolError || !strings.Contains(r.Content, "the disk is full") {
		t.Fatalf("fail = %+v", r)
	}
	// find_tools finds the server's tools like any other.
	if r := run(t, reg, "find_tools", `{"query":"add two numbers"}`); !strings.Contains(r.Content, "demo_add (mcp_demo)") {
		t.Fatalf("find_tools = %s", r.Content)
	}
}

func TestCallsAreBoundedByTheTimeout(t *testing.T) {
	reg := newRegistry(t)
	c := New(Server{Name: "demo", Timeout: 200 * time.Millisecond, transport: inMemory(t, nil)}, Deps{}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := run(t, reg, "demo_slow", `{}`); r.Code != tools.CodeTimeout {
		t.Fatalf("slow = %+v", r)
	}
	if r := run(t, reg, "demo_add", `{"a":1,"b":1}`); r.Status != tools.StatusSuccess {
		t.Fatalf("the server is unusable after a timed-out call: %+v", r)
	}
}

func TestServerDownAtStartIsListedOnLoad(t *testing.T) {
	reg := newRegistry(t)
	var down atomic.Bool
	down.Store(true)
	c := New(Server{Name: "late", Description: "Late tools", transport: inMemory(t, &down)}, Deps{}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, _ := reg.Group("mcp_late")
	if !strings.Contains(g.Description, "not reachable at start") || len(reg.GroupTools("mcp_late", nil)) != 0 {
		t.Fatalf("group while down = %+v", g)
	}
	if r := run(t, reg, "load_tool_group", `{"group_name":"mcp_late"}`); r.Code != tools.CodeUnavailable || !strings.Contains(r.Content, "connection refused") {
		t.Fatalf("load while down = %+v", r)
	}
	down.Store(false)
	if r := run(t, reg, "load_tool_group", `{"group_name":"mcp_late"}`); r.Status != tools.StatusSuccess || !strings.Contains(r.Content, "late_add") {
		t.Fatalf("load when up = %+v", r)
	}
	if g, _ := reg.Group("mcp_late"); g.Description != "Late tools" || reg.GroupNames() != "mcp_late" {
		t.Fatalf("group after listing = %+v (%s)", g, reg.GroupNames())
	}
	if r := run(t, reg, "late_add", `{"a":1,"b":2}`); !strings.HasPrefix(r.Content, "1 + 2 = 3") {
		t.Fatalf("add = %+v", r)
	}
}

// waitFor waits up to 10s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

var pid = regexp.MustCompile(`pid (\d+)`)

// A real stdio subprocess (this test binary, serving the test server):
// when it dies, calls answer unavailable and Run starts it again.
func TestStdioServerIsRestartedAfterItDies(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t)
	c := New(Server{Name: "proc", Command: exe, Args: []string{"-test.run=^$"},
		Env: map[string]string{mcptest.EnvVar: "1"}}, Deps{}, quiet)
	c.policy.Initial, c.policy.Max = 20*time.Millisecond, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	if err := Register(ctx, reg, c); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	first := run(t, reg, "proc_add", `{"a":20,"b":22}`)
	if !strings.HasPrefix(first.Content, "20 + 22 = 42") {
		t.Fatalf("add = %+v", first)
	}
	if r := run(t, reg, "proc_crash", `{}`); r.Code != tools.CodeUnavailable {
		t.Fatalf("crash = %+v", r)
	}
	deadline := time.Now().Add(20 * time.Second)
	var again tools.Result
	for {
		again = run(t, reg, "proc_add", `{"a":1,"b":1}`)
		if again.Status == tools.StatusSuccess {
			break
		}
		if again.Code != tools.CodeUnavailable || time.Now().After(deadline) {
			t.Fatalf("while restarting = %+v", again)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p1, p2 := pid.FindStringSubmatch(first.Content), pid.FindStringSubmatch(again.Content); p1 == nil || p2 == nil || p1[1] == p2[1] {
		t.Fatalf("not a new process: %q then %q", first.Content, again.Content)
	}
}

func TestCheckNamesTheKey(t *testing.T) {
	ch := &config.Checker{Section: "mcp"}
	Config{Servers: []Server{
		{Name: "ok", Command: "x"},
		{Name: "Bad-Name", Command: "x"},
		{Name: "ok", URL: "http://h/mcp"},
		{Name: "both", Command: "x", URL: "http://h"},
		{Name: "web", URL: "ftp://h"},
	}}.Check(ch)
	errs := ch.Errors()
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{"mcp.servers[1].name", "mcp.servers[2].name: \"ok\" is used", "mcp.servers[3].command: give either", "mcp.servers[4].url"} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing %q in:\n%s", want, joined)
		}
	}
	if len(errs) != 4 {
		t.Errorf("%d errors:\n%s", len(errs), joined)
	}
}

func TestToolNames(t *testing.T) {
	for in, want := range map[string]string{
		"read_file":             "fs_read_file",
		"Read-File.v2":          "fs_read_file_v2",
		strings.Repeat("x", 80): "fs_" + strings.Repeat("x", 61),
	} {
		if got := toolName("fs", in); got != want {
			t.Errorf("toolName(%q) = %q, want %q", in, got, want)
		}
	}
}

// An MCP tool's effect comes from its annotations; without any it is not
// trusted to be harmless.
func TestEffectFromAnnotations(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		a    *sdk.ToolAnnotations
		want tools.Effect
	}{
		{nil, tools.EffectMutate},
		{&sdk.ToolAnnotations{ReadOnlyHint: true}, tools.EffectRead},
		{&sdk.ToolAnnotations{DestructiveHint: &yes}, tools.EffectDestructive},
		{&sdk.ToolAnnotations{DestructiveHint: &no}, tools.EffectMutate},
		{&sdk.ToolAnnotations{}, tools.EffectMutate},
	} {
		if got := effect(tc.a); got != tc.want {
			t.Errorf("effect(%+v) = %v, want %v", tc.a, got, tc.want)
		}
	}
}

// A streamable-HTTP server: the configured headers go with every request
// (a server that checks its token refuses without them), and its tools
// work like a stdio server's.
func TestStreamableHTTPServerWithHeaders(t *testing.T) {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcptest.NewServer() }, nil)
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0k" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		seen.Add(1)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	reg := newRegistry(t)
	c := New(Server{Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer t0k"}}, Deps{}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := run(t, reg, "remote_add", `{"a":4,"b":5}`); !strings.HasPrefix(r.Content, "4 + 5 = 9") {
		t.Fatalf("add over HTTP = %+v", r)
	}
	if seen.Load() == 0 {
		t.Fatal("no request carried the header")
	}

	// Without the header the server refuses: the group says it was not
	// reachable and a load reports unavailable.
	reg2 := newRegistry(t)
	bad := New(Server{Name: "nokey", URL: srv.URL}, Deps{}, quiet)
	if err := Register(context.Background(), reg2, bad); err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if g, _ := reg2.Group("mcp_nokey"); !strings.Contains(g.Description, "not reachable at start") {
		t.Fatalf("group = %+v", g)
	}
	if r := run(t, reg2, "load_tool_group", `{"group_name":"mcp_nokey"}`); r.Code != tools.CodeUnavailable {
		t.Fatalf("load = %+v", r)
	}
}

// TEST (effects too low): a server's tool whose name or description says
// it sends, deletes or shares is destructive whatever its hints say (and
// so registers, where a read-only one would be refused); every tool's
// results are untrusted and it passes unknown arguments on.
func TestToolThatSaysItActsIsDestructive(t *testing.T) {
	c := New(Server{Name: "mail"}, Deps{}, quiet)
	names := map[string]bool{}
	for _, st := range []*sdk.Tool{
		{Name: "send_message", Description: "Post a message", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "purge", Description: "Deletes every draft", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
	} {
		tl := c.tool(st, names)
		if tl.ReadOnly || tools.EffectOf(context.Background(), tl.Definition, nil) != tools.EffectDestructive || !tl.Untrusted || !tl.Open {
			t.Errorf("%s: read-only %v, effect %v, untrusted %v, open %v", st.Name, tl.ReadOnly, tools.EffectOf(context.Background(), tl.Definition, nil), tl.Untrusted, tl.Open)
		}
		if err := tools.NewRegistry().Add(tl); err != nil {
			t.Errorf("%s: %v", st.Name, err)
		}
	}
	read := c.tool(&sdk.Tool{Name: "list_messages", Description: "List messages", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, names)
	if tools.EffectOf(context.Background(), read.Definition, nil) != tools.EffectRead {
		t.Errorf("a listing tool was raised: %+v", read.Definition)
	}
}

// Found by probing: a stdio server that did not finish connecting before
// load_tool_group's timeout was left running after loadout exited. A
// server that never answers (here a script that starts two children and
// waits) is ended, with its children, when the connection gives up.
func TestServerThatNeverConnectsIsEnded(t *testing.T) {
	const marker = "1005.5"
	c := New(Server{Name: "mute", Command: "sh", Args: []string{"-c", "sleep " + marker + " & sleep " + marker}}, Deps{}, quiet)
	c.reg = newRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := c.ensure(ctx); err == nil {
		t.Fatal("a mute server connected")
	}
	if n := proctest.Left(marker, 10*time.Second); n != 0 {
		t.Fatalf("%d processes of the server are left", n)
	}
}
