package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat"
	"loadout/chat/chattest"
)

// buttonsOf finds the sent message whose text contains what, and returns
// it with its buttons' data by label prefix.
func buttonsOf(t *testing.T, tg *telegramtest.Server, what string) (telegramtest.Sent, map[string]string) {
	t.Helper()
	var found telegramtest.Sent
	tg.WaitFor(t, "a question that says "+what, func() bool {
		for _, s := range tg.Sent() {
			if strings.Contains(s.Text, what) && len(s.Buttons) > 0 {
				found = s
				return true
			}
		}
		return false
	})
	data := map[string]string{}
	for _, b := range found.Buttons {
		label, _, _ := strings.Cut(b.Text, " #")
		data[label] = b.Data
	}
	return found, data
}

// waitText waits for a message that contains what.
func waitText(t *testing.T, tg *telegramtest.Server, what string) telegramtest.Sent {
	t.Helper()
	var found telegramtest.Sent
	tg.WaitFor(t, "a message that says "+what, func() bool {
		for _, s := range tg.Sent() {
			if strings.Contains(s.Text, what) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// TEST: the approval flow's new parts through `loadout serve` on
// Telegram: two calls of one answer are asked each with its own buttons
// and decided one by one; "Always allow" takes the host the question
// showed, and the next POST there runs unasked; a scheduled task's call
// is held and asked in the chat, not run; /rules and /audit say what was
// decided.
func TestRulesBatchesAndAuditOnTelegram(t *testing.T) {
	var posts atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer site.Close()
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	_, stop := serveTelegram(t, tg, model, "web:\n  allow_hosts: [\"127.0.0.1\"]\ntools:\n  confirm: mutating\n  confirm_tools: {scheduled_tasks: never}\n")
	defer stop()
	ana := telegramtest.User{ID: 42}
	post := func(path string) chat.ToolCall {
		return chat.ToolCall{Name: "http_request", Arguments: fmt.Sprintf(`{"method":"POST","url":%q,"body":"{}"}`, site.URL+path)}
	}

	// Two calls in one answer: each asked alone.
	model.Call("load_tool_group", `{"group_name":"http"}`)
	model.Push(chattest.Step{Calls: []chat.ToolCall{post("/one"), post("/two")}})
	model.Text("The first went; the second did not.")
	tg.Push(telegramtest.Message{From: ana, Text: "post both"})
	waitText(t, tg, "2 actions wait for your answer")
	one, b1 := buttonsOf(t, tg, "1 of 2: POST "+site.URL+"/one")
	two, b2 := buttonsOf(t, tg, "2 of 2: POST "+site.URL+"/two")
	if b1["Approve"] == "" || b1["Deny"] == "" || b2["Approve"] == "" || b1["Approve"] == b2["Approve"] {
		t.Fatalf("buttons %v and %v", b1, b2)
	}
	tg.Click(ana, 42, 0, one.MessageID, b1["Approve"])
	waitText(t, tg, "Still waiting for your answer")
	if posts.Load() != 1 {
		t.Fatalf("%d posts after approving the first", posts.Load())
	}
	tg.Click(ana, 42, 0, two.MessageID, b2["Deny"])
	waitText(t, tg, "The first went; the second did not.")
	if posts.Load() != 1 {
		t.Fatalf("%d posts after denying the second", posts.Load())
	}

	// Always allow: the host shown, then no question.
	model.Call("http_request", post("/three").Arguments)
	model.Text("Posted three.")
	tg.Push(telegramtest.Message{From: ana, Text: "post three"})
	three, b3 := buttonsOf(t, tg, "without asking from now on: http_request reaching 127.0.0.1")
	if b3["Always allow"] == "" {
		t.Fatalf("no Always allow button: %+v", three.Buttons)
	}
	tg.Click(ana, 42, 0, three.MessageID, b3["Always allow"])
	waitText(t, tg, "Posted three.")
	model.Call("http_request", post("/four").Arguments)
	model.Text("Posted four.")
	before := len(tg.Sent())
	tg.Push(telegramtest.Message{From: ana, Text: "post four"})
	waitText(t, tg, "Posted four.")
	for _, s := range tg.Sent()[before:] {
		if len(s.Buttons) > 0 {
			t.Fatalf("asked again within the rule: %q", s.Text)
		}
	}
	if posts.Load() != 3 {
		t.Fatalf("%d posts, want 3", posts.Load())
	}

	// A scheduled task's call that needs approval is asked in the chat.
	at := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	model.Call("load_tool_group", `{"group_name":"scheduled_tasks"}`)
	model.Call("scheduled_tasks", `{"action":"schedule","prompt":"remember the weather","at":"`+at+`"}`)
	model.Call("scheduled_tasks", `{"action":"run_now","id":1}`)
	model.Text("Scheduled, and ran it once now.")
	model.Call("memory", `{"action":"save","text":"It was sunny on the day the task ran."}`)
	tg.Push(telegramtest.Message{From: ana, Text: "every day remember the weather"})
	task, bt := buttonsOf(t, tg, "Your scheduled task needs your approval first")
	if !strings.Contains(task.Text, "It was sunny") || bt["Approve"] == "" {
		t.Fatalf("task question %q, buttons %v", task.Text, bt)
	}

	tg.Push(telegramtest.Message{From: ana, Text: "/rules"})
	rules := waitText(t, tg, "Your rules:")
	if !strings.Contains(rules.Text, "allow http_request reaching 127.0.0.1") {
		t.Fatalf("/rules = %q", rules.Text)
	}
	tg.Push(telegramtest.Message{From: ana, Text: "/audit"})
	audit := waitText(t, tg, "decisions in this chat")
	for _, want := range []string{"allowed by rule #", "denied: POST " + site.URL + "/two", "approved, ran: POST " + site.URL + "/one"} {
		if !strings.Contains(audit.Text, want) {
			t.Errorf("/audit lacks %q:\n%s", want, audit.Text)
		}
	}
}

// TEST: the same on the console: the calls of one answer are answered a
// line each ("y", then "n"), "a" takes Always allow, and /rules and
// /audit answer.
func TestRulesBatchesAndAuditOnTheConsole(t *testing.T) {
	var posts atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	defer site.Close()
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "web:\n  allow_hosts: [\"127.0.0.1\"]\n")
	post := func(path string) chat.ToolCall {
		return chat.ToolCall{Name: "http_request", Arguments: fmt.Sprintf(`{"method":"POST","url":%q,"body":"{}"}`, site.URL+path)}
	}
	model.Call("load_tool_group", `{"group_name":"http"}`)
	model.Push(chattest.Step{Calls: []chat.ToolCall{post("/one"), post("/two")}})
	model.Text("The first went; the second did not.")
	model.Call("http_request", post("/three").Arguments)
	model.Text("Posted three.")
	model.Call("http_request", post("/four").Arguments)
	model.Text("Posted four.")
	out, err := runCLI(t, "post both\ny\nn\npost three\na\npost four\n/rules\n/audit\n", "-config", cfgPath, "chat")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"2 actions wait for your answer", "1 of 2: POST " + site.URL + "/one", "Still waiting for your answer",
		"The first went; the second did not.", "a, or /always #", "Posted three.", "Posted four.",
		"allow http_request reaching 127.0.0.1", "allowed by rule #", "denied: POST " + site.URL + "/two",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the console lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "? [y/n]") != 3 || posts.Load() != 3 {
		t.Fatalf("%d questions, %d posts:\n%s", strings.Count(out, "? [y/n]"), posts.Load(), out)
	}
}
