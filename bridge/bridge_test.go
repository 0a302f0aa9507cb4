package bridge_test

import (
	"context"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/chat"
	"loadout/store/storetest"
	"loadout/tools"
)

func TestParseCommand(t *testing.T) {
	cases := []struct {
		in, name, args string
		ok             bool
	}{
		{"/clear", "clear", "", true},
		{"/Clear@loadout_bot", "clear", "", true},
		{"  /connect google ", "connect", "google", true},
		{"/etc/hosts is a file", "", "", false},
		{"hello /clear", "", "", false},
		{"/", "", "", false},
	}
	for _, c := range cases {
		name, args, ok := bridge.ParseCommand(c.in)
		if name != c.name || args != c.args || ok != c.ok {
			t.Errorf("ParseCommand(%q) = %q, %q, %v", c.in, name, args, ok)
		}
	}
}

func TestRouterCommands(t *testing.T) {
	e := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		return r.AddGroup(tools.Group{Name: "pdf", Description: "PDF"},
			tools.New(tools.Definition{Name: "pdf_info", Description: "info"}, func(context.Context, struct{}) (any, error) { return "ok", nil }))
	}, Config: chat.Config{Model: "test-model"}})
	r := bridge.NewRouter(e.Engine, "Ada")
	r.Register(bridge.Command{Name: "connect", Args: "google", Help: "connect an account",
		Run: func(ctx context.Context, in chat.Inbound, args string) (string, error) { return "connect " + args, nil }})
	ctx := context.Background()
	in := func(text string) chat.Inbound { return chat.Inbound{ChatKey: "k", UserKey: "u", Text: text} }
	say := func(text string) string {
		t.Helper()
		out, err := r.Handle(ctx, in(text))
		if err != nil {
			t.Fatal(err)
		}
		return out.Text
	}
	if s := say("/start"); !strings.Contains(s, "Ada") || !strings.Contains(s, "/clear") {
		t.Errorf("/start = %q", s)
	}
	if s := say("/help"); !strings.Contains(s, "/connect google — connect an account") || !strings.Contains(s, "/status") {
		t.Errorf("/help = %q", s)
	}
	if s := say("/connect google"); s != "connect google" {
		t.Errorf("/connect = %q", s)
	}
	if s := say("/nope"); !strings.Contains(s, "/nope") || !strings.Contains(s, "/help") {
		t.Errorf("unknown = %q", s)
	}
	if len(e.Model.Requests()) != 0 {
		t.Fatal("a command reached the model")
	}
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Text("loaded")
	if s := say("load pdf"); s != "loaded" {
		t.Errorf("message = %q", s)
	}
	st := say("/status")
	for _, want := range []string{"Messages: 4", "Loaded tool groups: pdf", "Active tools: 2 (", "Tokens used: 30 (prompt 20, completion 10)", "Model: test-model, routing: groups",
		"Loaded tool groups: pdf (1 tool, ", "schema tokens per request: core ", "routing all would send ", "0 of the prompt tokens from the provider's cache"} {
		if !strings.Contains(st, want) {
			t.Errorf("/status lacks %q:\n%s", want, st)
		}
	}
	if s := say("/clear"); !strings.Contains(s, "new conversation") {
		t.Errorf("/clear = %q", s)
	}
	if st := say("/status"); !strings.Contains(st, "Loaded tool groups: none") || !strings.Contains(st, "Messages: 0") {
		t.Errorf("/status after clear:\n%s", st)
	}
}

func TestSplit(t *testing.T) {
	if got := bridge.Split("short", 100); len(got) != 1 || got[0] != "short" {
		t.Fatalf("short = %q", got)
	}
	para := strings.Repeat("word ", 30) // 150 chars
	text := para + "\n\n" + para + "\n\n" + para
	parts := bridge.Split(text, 200)
	if len(parts) != 3 {
		t.Fatalf("paragraphs: %d parts", len(parts))
	}
	code := "```go\n" + strings.Repeat("fmt.Println(\"hello\")\n", 30) + "```"
	parts = bridge.Split("intro\n\n"+code+"\n\noutro", 200)
	for i, p := range parts {
		if len([]rune(p)) > 200 {
			t.Errorf("part %d has %d chars", i, len([]rune(p)))
		}
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("part %d leaves a code block open:\n%s", i, p)
		}
	}
	joined := strings.Join(parts, "\n")
	if strings.Count(joined, "fmt.Println") != 30 || !strings.HasPrefix(parts[0], "intro") || !strings.HasSuffix(parts[len(parts)-1], "outro") {
		t.Errorf("content lost or reordered: %q", parts)
	}
	for i := 1; i < len(parts)-1; i++ {
		if !strings.HasPrefix(parts[i], "```go\n") {
			t.Errorf("continued block %d does not reopen with its language: %q", i, parts[i][:10])
		}
	}
	long := strings.Repeat("x", 450)
	parts = bridge.Split(long, 100)
	if len(parts) != 5 || strings.Join(parts, "") != long {
		t.Errorf("hard cut = %d parts", len(parts))
	}
}

func TestAllowlist(t *testing.T) {
	var zero *bridge.Allowlist
	if zero.Allowed("1", "ana") {
		t.Error("nil allowlist allows")
	}
	a := bridge.NewAllowlist([]string{"42", "@Ana", " "})
	if !a.Allowed("42", "") || !a.Allowed("7", "ana") || !a.Allowed("7", "@ANA") || a.Allowed("7", "bob") || a.Allowed("", "") {
		t.Error("allowlist decisions wrong")
	}
	if bridge.NewAllowlist(nil).Allowed("1", "x") {
		t.Error("empty allowlist allows")
	}
	if !a.FirstRefusal("7") || a.FirstRefusal("7") || !a.FirstRefusal("8") {
		t.Error("refusal should be sent once per user")
	}
}

func TestHelpStartAndStatusFitTheDeployment(t *testing.T) {
	e := storetest.NewEnv(t, storetest.Options{Config: chat.Config{Name: "loadout"}})
	r := bridge.NewRouter(e.Engine, "loadout")
	r.Register(bridge.Command{Name: "connect", Args: "google", Help: "connect your Google account", Hidden: true,
		Run: func(context.Context, chat.Inbound, string) (string, error) {
			return "Google isn't set up on this server.", nil
		}})
	ctx := context.Background()
	say := func(text string) string {
		t.Helper()
		out, err := r.Handle(ctx, chat.Inbound{ChatKey: "k", UserKey: "u", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return out.Text
	}
	for _, cmd := range []string{"/help", "/start"} {
		if s := say(cmd); strings.Contains(s, "/connect") || !strings.Contains(s, "/clear") {
			t.Errorf("%s lists a command that does not work here:\n%s", cmd, s)
		}
	}
	if s := say("/connect google"); !strings.Contains(s, "isn't set up") {
		t.Errorf("a hidden command still answers: %q", s)
	}
	if err := e.Store.SetChatSetting(ctx, "k", tools.SettingName, "Ada"); err != nil {
		t.Fatal(err)
	}
	if s := say("/start"); !strings.Contains(s, "I'm Ada.") {
		t.Errorf("/start ignores the chat's name: %q", s)
	}
	say("/clear")
	if s := say("/status"); !strings.HasPrefix(s, "No conversation yet") || strings.Contains(s, "open for") {
		t.Errorf("/status after /clear = %q", s)
	}
	e.Model.Text("hi")
	say("hello")
	if s := say("/status"); !strings.HasPrefix(s, "Conversation open for") {
		t.Errorf("/status after a message = %q", s)
	}
}
