package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
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

// everythingServer is the reference "everything" MCP server from the npm
// registry, as .ci/run installs it: the path of its entry point, or a
// skip when it is not installed here.
func everythingServer(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOADOUT_MCP_EVERYTHING")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skip("no cache directory for the reference MCP server")
		}
		dir = filepath.Join(cache, "loadout", "mcp-everything")
	}
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Skipf("the reference MCP server is not installed (%v); .ci/run installs it", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	return entry
}

// The reference server offers its elicitation tool once loadout declares
// the capability; in `loadout chat` its form is asked in the console,
// field by field, the answers typed there reach the server, and the
// model reads only what the server returned.
func TestEverythingServerElicitsInTheConsole(t *testing.T) {
	entry := everythingServer(t)
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      command: node\n      args: [%q, \"stdio\"]\n", entry)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	// The group is loaded in a turn of its own: a turn that loads it has
	// read the server's text, and its mutating calls would wait for an
	// approval.
	model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model.Text("Loaded.")
	model.Call("every_trigger_elicitation_request", `{}`)
	model.Text("Thanks, noted.")
	// Accept, a name, then every optional field skipped.
	answers := "Accept\nAda Lovelace\n" + strings.Repeat("-\n", 12)
	out, err := runCLI(t, "load the every tools\nask me for my details\n"+answers, "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Thanks, noted.") {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"The every service asks you:", "Please provide inputs for the following fields:", "Accept", "Your full, legal name"} {
		if !strings.Contains(out, want) {
			t.Errorf("the console did not show %q:\n%s", want, out)
		}
	}
	got := lastToolResult(model)
	if !strings.Contains(got, "User provided the requested information") || !strings.Contains(got, "Name: Ada Lovelace") {
		t.Fatalf("the server did not get the answer: %s\n%s", got, out)
	}
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Content, "Ada Lovelace") {
				t.Fatalf("what the person typed reached the model as a message: %q", m.Content)
			}
		}
	}
}

// Through the Telegram fake, in a group: the reference server's question
// goes to the chat with Accept, Decline and Cancel buttons that only the
// person whose message called the tool may press (another's press is
// refused at the press, another's reply is not taken as the answer); her
// press and her replies answer the form, and the server gets them.
func TestEverythingServerElicitsInTelegram(t *testing.T) {
	entry := everythingServer(t)
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      command: node\n      args: [%q, \"stdio\"]\n", entry)
	serveTelegramFor(t, tg, model, `"42", "43"`, extra)
	ana := telegramtest.User{ID: 42, UserName: "ana"}
	bea := telegramtest.User{ID: 43, UserName: "bea", FirstName: "Bea"}
	const group = -100777
	model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model.Text("Loaded.")
	model.Call("every_trigger_elicitation_request", `{}`)
	model.Text("Thanks, noted.")
	model.Text("Hello Bea.")
	tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "group", Text: "@" + telegramtest.BotUserName + " load the every tools"})
	tg.WaitSent(t, 1)
	tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "group", Text: "@" + telegramtest.BotUserName + " ask me for my details"})
	first := tg.WaitSent(t, 2)[1]
	if !strings.Contains(first.Text, "The every service asks you:") || len(first.Buttons) != 3 || first.Buttons[0].Text != "Accept" {
		t.Fatalf("question = %+v", first)
	}
	// Bea's press is refused where it happens; her reply waits its turn.
	tg.Click(bea, group, 0, first.MessageID, strings.Replace(first.Buttons[0].Data, ":42", ":43", 1))
	tg.Click(bea, group, 0, first.MessageID, first.Buttons[0].Data)
	tg.WaitFor(t, "the refusals of Bea's presses", func() bool { return len(tg.Calls("answerCallbackQuery")) >= 2 })
	for _, c := range tg.Calls("answerCallbackQuery") {
		if c.Params.Get("show_alert") != "true" {
			t.Fatalf("Bea's press was not refused: %v", c.Params)
		}
	}
	tg.Push(telegramtest.Message{From: bea, ChatID: group, ChatType: "group", ReplyToBot: true, Text: "Bob"})
	tg.Click(ana, group, 0, first.MessageID, first.Buttons[0].Data)
	name := tg.WaitSent(t, 3)[2]
	if !strings.Contains(name.Text, "Your full, legal name") {
		t.Fatalf("second question = %+v", name)
	}
	tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "group", ReplyToBot: true, Text: "Ada Lovelace"})
	for i := 0; i < 12; i++ {
		tg.WaitSent(t, 4+i)
		tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "group", ReplyToBot: true, Text: "-"})
	}
	tg.WaitFor(t, "the answer", func() bool {
		for _, s := range tg.Sent() {
			if strings.Contains(s.Text, "Thanks, noted.") {
				return true
			}
		}
		return false
	})
	var got string
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && strings.Contains(m.Content, "User inputs") {
				got = m.Content
			}
		}
	}
	if !strings.Contains(got, "Name: Ada Lovelace") || strings.Contains(got, "Bob") {
		t.Fatalf("the server got: %s", got)
	}
}

// The reference server offers its sampling tool once loadout declares
// sampling; its request goes to the configured model (the fake) with the
// server's system prompt and bound, after the person allowed it in the
// console, and its answer reaches the server. Denied, nothing reaches the
// model and the server gets an error.
func TestEverythingServerSamplesAfterThePersonAllows(t *testing.T) {
	entry := everythingServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      command: node\n      args: [%q, \"stdio\"]\n", entry)

	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model.Text("Loaded.")
	model.Call("every_trigger_sampling_request", `{"prompt":"say hi","maxTokens":20}`)
	model.Text("Hi from the model.")
	model.Text("The server got it.")
	out, err := runCLI(t, "load the every tools\ntry sampling\nAllow\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "The server got it.") || !strings.Contains(out, "asks to use the model on your behalf") {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := model.Requests()
	sampled := reqs[3]
	if chattest.System(sampled) != "You are a helpful test server." || len(sampled.Tools) != 0 || sampled.MaxTokens != 20 ||
		!strings.Contains(sampled.Messages[1].Content, "say hi") {
		t.Fatalf("the sampling request = %+v", sampled)
	}
	if got := lastToolResult(model); !strings.Contains(got, "Hi from the model.") {
		t.Fatalf("the server did not get the model's answer: %s", got)
	}

	model2 := chattest.NewModelServer(t)
	cfgPath2, _ := writeConfig(t, model2.URL, extra)
	model2.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model2.Text("Loaded.")
	model2.Call("every_trigger_sampling_request", `{"prompt":"say hi","maxTokens":20}`)
	model2.Text("It was refused.")
	out, err = runCLI(t, "load the every tools\ntry sampling\nDeny\n", "-config", cfgPath2, "chat")
	if err != nil || !strings.Contains(out, "It was refused.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := len(model2.Requests()); n != 4 {
		t.Fatalf("%d model requests: the denied sampling reached the model", n)
	}
	if got := lastToolResult(model2); !strings.Contains(got, "did not allow") {
		t.Fatalf("denied sampling = %s", got)
	}
}

// The reference server's image reaches a model that reads images
// (llm.vision) as an image part after the tool's result, which names the
// file it was saved as in the chat's files; without vision the model
// reads only the text.
func TestEverythingServerImageReachesTheModel(t *testing.T) {
	entry := everythingServer(t)
	for _, vision := range []bool{true, false} {
		model := chattest.NewModelServer(t)
		extra := fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      command: node\n      args: [%q, \"stdio\"]\n", entry)
		cfgPath, _ := writeConfig(t, model.URL, extra)
		raw, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg := strings.Replace(string(raw), "llm:\n", fmt.Sprintf("llm:\n  vision: %v\n", vision), 1)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
		model.Call("every_get_tiny_image", `{}`)
		model.Text("A logo.")
		out, err := runCLI(t, "show me the image\n", "-config", cfgPath, "chat")
		if err != nil || !strings.Contains(out, "A logo.") {
			t.Fatalf("vision %v: %v\n%s", vision, err, out)
		}
		reqs := model.Requests()
		last := reqs[len(reqs)-1]
		var tool string
		var image bool
		for _, m := range last.Messages {
			if m.Role == "tool" && strings.Contains(m.Content, "image image/png") {
				tool = m.Content
			}
			for _, p := range m.MultiContent {
				if p.ImageURL != nil && strings.HasPrefix(p.ImageURL.URL, "data:image/png;base64,iVBOR") {
					image = m.Role == "user"
				}
			}
		}
		if !strings.Contains(tool, "saved as every-get_tiny_image-1.png") {
			t.Fatalf("vision %v: the tool's result = %q", vision, tool)
		}
		if image != vision {
			t.Fatalf("vision %v: image part sent = %v", vision, image)
		}
	}
}

// The reference server asks for roots once loadout declares them: it gets
// the chat's workspace as its one root; with roots: false it is offered
// none (and its roots tool is not offered at all).
func TestEverythingServerGetsTheWorkspaceAsItsRoot(t *testing.T) {
	entry := everythingServer(t)
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      command: node\n      args: [%q, \"stdio\"]\n", entry)
	cfgPath, dbPath := writeConfig(t, model.URL, extra)
	model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model.Call("every_get_roots_list", `{}`)
	model.Text("Listed.")
	out, err := runCLI(t, "what are your roots?\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Listed.") {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "file://" + filepath.Join(filepath.Dir(dbPath), "files", "console_3alocal")
	if got := lastToolResult(model); !strings.Contains(got, want) {
		t.Fatalf("roots = %s, want %s", got, want)
	}

	off := chattest.NewModelServer(t)
	cfgPath, _ = writeConfig(t, off.URL, extra+"      roots: false\n")
	off.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	off.Text("Loaded.")
	if out, err := runCLI(t, "load it\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Loaded.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(off); !strings.Contains(got, "every_echo") || strings.Contains(got, "every_get_roots_list") {
		t.Fatalf("with roots off, the group = %s", got)
	}
}

// The SDK has no tasks (task-augmented tools/call): loadout does not
// declare them, and a tool the server runs only as a task answers the
// model that it is not supported, saying why, rather than a protocol
// error.
func TestEverythingServerTaskOnlyToolIsDeclaredUnsupported(t *testing.T) {
	entry := everythingServer(t)
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      command: node\n      args: [%q, \"stdio\"]\n", entry)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model.Text("Loaded.")
	model.Call("every_simulate_research_query", `{"topic":"tides"}`)
	model.Text("Not possible.")
	out, err := runCLI(t, "load the every tools\nresearch tides\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Not possible.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(model); !strings.Contains(got, `"code":"unsupported"`) || !strings.Contains(got, "runs only as a task") {
		t.Fatalf("a task-only tool = %s", got)
	}
}

// Through the Telegram fake, a remote server behind an OAuth fake: in a
// group, Ana is told to sign in privately (no link there); /connect notes
// in her private chat gives her the link; once she signed in, her calls in
// the group are hers; Bea's call in the same group asks Bea to sign in
// rather than using Ana's token.
func TestRemoteServerSignInThroughTelegram(t *testing.T) {
	o := mcptest.NewOAuth(t)
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("google:\n  token_key: %s\nweb:\n  allow_hosts: [\"127.0.0.1\"]\nmcp:\n  redirect_url: http://127.0.0.1:1/oauth/mcp/callback\n  servers:\n    - name: notes\n      url: %s\n      auth: person\n",
		base64.StdEncoding.EncodeToString(make([]byte, 32)), o.MCPURL())
	addr, _ := serveTelegramFor(t, tg, model, `"42", "43"`, extra)
	ana := telegramtest.User{ID: 42, UserName: "ana"}
	bea := telegramtest.User{ID: 43, UserName: "bea", FirstName: "Bea"}
	const group = -100888
	mention := "@" + telegramtest.BotUserName + " "

	model.Call("load_tool_group", `{"group_name":"mcp_notes"}`)
	model.Text("Please sign in first.")
	tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "group", Text: mention + "what do my notes say?"})
	tg.WaitSent(t, 1)
	if got := lastToolResult(model); !strings.Contains(got, "not_connected") || !strings.Contains(got, "/connect notes") || strings.Contains(got, "authorize") {
		t.Fatalf("in the group = %s", got)
	}
	tg.Push(telegramtest.Message{From: ana, Text: "/connect notes"})
	sent := tg.WaitSent(t, 2)
	linkAt := strings.Index(sent[1].Text, "http")
	if sent[1].ChatID != 42 || linkAt < 0 {
		t.Fatalf("connect = %+v", sent[1])
	}
	link := strings.Fields(html.UnescapeString(sent[1].Text[linkAt:]))[0]
	if page, err := mcptest.SignInAt(link, "ana", "http://"+addr); err != nil || !strings.Contains(page, "Signed in to notes") {
		t.Fatalf("sign-in = %v: %s", err, page)
	}
	tg.WaitFor(t, "the notice that Ana is signed in", func() bool {
		for _, s := range tg.Sent() {
			if s.ChatID == 42 && strings.Contains(s.Text, "signed in to notes") {
				return true
			}
		}
		return false
	})
	model.Call("load_tool_group", `{"group_name":"mcp_notes"}`)
	model.Call("notes_whoami", `{}`)
	model.Text("You are Ana.")
	tg.Push(telegramtest.Message{From: ana, ChatID: group, ChatType: "group", Text: mention + "who am I at notes?"})
	tg.WaitFor(t, "Ana's answer", func() bool { return strings.Contains(lastSent(tg), "You are Ana.") })
	if got := lastToolResult(model); got != "you are ana" {
		t.Fatalf("Ana's call = %s", got)
	}
	model.Call("notes_whoami", `{}`)
	model.Text("Bea must sign in.")
	tg.Push(telegramtest.Message{From: bea, ChatID: group, ChatType: "group", Text: mention + "who am I at notes?"})
	tg.WaitFor(t, "Bea's answer", func() bool { return strings.Contains(lastSent(tg), "Bea must sign in.") })
	if got := lastToolResult(model); !strings.Contains(got, "not_connected") || strings.Contains(got, "ana") {
		t.Fatalf("Bea's call = %s", got)
	}
}

func lastSent(tg *telegramtest.Server) string {
	s := tg.Sent()
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1].Text
}

// `loadout mcp login notes` signs the operator in to a server with auth:
// operator from this terminal (a loopback callback); `loadout chat` then
// uses that one sign-in, for everyone.
func TestOperatorSignsInFromTheTerminal(t *testing.T) {
	o := mcptest.NewOAuth(t)
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("google:\n  token_key: %s\nmcp:\n  servers:\n    - name: notes\n      url: %s\n      auth: operator\n",
		base64.StdEncoding.EncodeToString(make([]byte, 32)), o.MCPURL())
	cfgPath, _ := writeConfig(t, model.URL, extra)
	if _, err := runCLI(t, "", "-config", cfgPath, "mcp", "login"); err == nil || !strings.Contains(err.Error(), "give the server") {
		t.Fatalf("without a server: %v", err)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		done <- run(ctx, []string{"-config", cfgPath, "mcp", "login", "notes"}, strings.NewReader(""), pw, io.Discard, env(map[string]string{"TEST_KEY": "sk-test"}))
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var link string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "http") {
			link = sc.Text()
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if page, err := mcptest.SignIn(link, "operator"); err != nil || !strings.Contains(page, "Signed in to notes") {
		t.Fatalf("sign-in %q = %v: %s", link, err, page)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	model.Call("load_tool_group", `{"group_name":"mcp_notes"}`)
	model.Call("notes_whoami", `{}`)
	model.Text("Done.")
	if out, err := runCLI(t, "who am I at notes?\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Done.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(model); got != "you are operator" {
		t.Fatalf("whoami = %s", got)
	}
}

// The reference server over streamable HTTP (started by the test on a
// free port): it offers its elicitation tool too, and the console's
// answers reach it.
func TestEverythingServerOverHTTPElicits(t *testing.T) {
	entry := everythingServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      url: %s\n", url))
	model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model.Text("Loaded.")
	model.Call("every_trigger_elicitation_request", `{}`)
	model.Text("Thanks.")
	out, err := runCLI(t, "load the every tools\nask me\nAccept\nGrace Hopper\n"+strings.Repeat("-\n", 12), "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Thanks.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(model); !strings.Contains(got, "Name: Grace Hopper") {
		t.Fatalf("the server got: %s", got)
	}
}

// A server with sampling_tools: true samples with a tool of its own:
// the model gets that tool (and none of loadout's), its call goes back to
// the server, which runs it and samples again with the result; the
// server's model hint names no model this deployment offers, so the
// configured model answers. The person's allowance is their rule.
func TestMCPServerSamplesWithItsTools(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: calc\n      command: %s\n      args: [\"-test.run=^$\"]\n      sampling_tools: true\n      env:\n        %s: \"1\"\n", exe, mcptest.EnvVar)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	model.Call("load_tool_group", `{"group_name":"mcp_calc"}`)
	model.Text("Loaded.")
	model.Call("calc_plan", `{"text":"Oslo"}`)
	model.Call("weather", `{"city":"Oslo"}`) // the sampling: the model calls the server's tool
	model.Text("Go; it is sunny.")           // the sampling again, with the tool's result
	model.Text("Planned.")
	out, err := runCLI(t, "load the calc tools\nplan a trip\nAllow\n/rules\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Planned.") || !strings.Contains(out, "I run none of them") || !strings.Contains(out, "allow mcp_sampling (calc)") {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := model.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d model requests", len(reqs))
	}
	first, second := reqs[3], reqs[4]
	if names := chattest.ToolNames(first); len(names) != 1 || names[0] != "weather" || chattest.System(first) != "You plan trips." || first.Model != reqs[0].Model {
		t.Fatalf("the first sampling request = %+v", first)
	}
	if n := len(second.Messages); n != 4 || second.Messages[2].ToolCalls[0].Function.Name != "weather" || second.Messages[3].Role != "tool" || second.Messages[3].Content != "sunny in Oslo" {
		t.Fatalf("the second sampling request = %+v", second.Messages)
	}
	if got := lastToolResult(model); !strings.Contains(got, "plan by") || !strings.Contains(got, "Go; it is sunny.") {
		t.Fatalf("the server got: %s", got)
	}
}

// Without sampling_tools, the same request is refused to the server
// with the key named; nothing reaches the model and nobody is asked.
func TestMCPServerSamplingWithToolsRefusedByDefault(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: calc\n      command: %s\n      args: [\"-test.run=^$\"]\n      env:\n        %s: \"1\"\n", exe, mcptest.EnvVar)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	model.Call("load_tool_group", `{"group_name":"mcp_calc"}`)
	model.Text("Loaded.")
	model.Call("calc_plan", `{"text":"Oslo"}`)
	model.Text("Refused.")
	out, err := runCLI(t, "load the calc tools\nplan a trip\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Refused.") || strings.Contains(out, "asks to use the model") {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := len(model.Requests()); n != 4 {
		t.Fatalf("%d model requests", n)
	}
	if got := lastToolResult(model); !strings.Contains(got, "sampling_tools: true") {
		t.Fatalf("the model read: %s", got)
	}
}

// The person's allowance for a server to use the model is their rule in
// the store: a second process (loadout restarted) samples without
// asking, /rules lists it, and once /rules remove takes it away the
// person is asked again.
func TestEverythingServerSamplingAllowanceSurvivesARestart(t *testing.T) {
	entry := everythingServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: every\n      command: node\n      args: [%q, \"stdio\"]\n", entry)
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	model.Call("load_tool_group", `{"group_name":"mcp_every"}`)
	model.Text("Loaded.")
	model.Call("every_trigger_sampling_request", `{"prompt":"say hi","maxTokens":20}`)
	model.Text("Hi from the model.")
	model.Text("The server got it.")
	out, err := runCLI(t, "load the every tools\ntry sampling\nAllow\n", "-config", cfgPath, "chat")
	if err != nil || strings.Count(out, "asks to use the model on your behalf") != 1 {
		t.Fatalf("%v\n%s", err, out)
	}

	model.Call("every_trigger_sampling_request", `{"prompt":"say hi again","maxTokens":20}`)
	model.Text("Hi again.")
	model.Text("Sampled without asking.")
	out, err = runCLI(t, "try sampling again\n/rules\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Sampled without asking.") || strings.Contains(out, "asks to use the model") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(model); !strings.Contains(got, "Hi again.") {
		t.Fatalf("the server got: %s", got)
	}
	code := regexp.MustCompile(`#([a-z0-9]{4}) — allow mcp_sampling \(every\)`).FindStringSubmatch(out)
	if code == nil {
		t.Fatalf("/rules does not list the allowance:\n%s", out)
	}

	n := len(model.Requests())
	model.Call("every_trigger_sampling_request", `{"prompt":"say hi once more","maxTokens":20}`)
	model.Text("Asked again.")
	out, err = runCLI(t, "/rules remove #"+code[1]+"\ntry sampling once more\nDeny\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Removed rule #"+code[1]) || !strings.Contains(out, "asks to use the model on your behalf") || !strings.Contains(out, "Asked again.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := len(model.Requests()) - n; got != 2 {
		t.Fatalf("%d model requests after the removal: the denied sampling reached the model", got)
	}
}
