package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
)

// catalogTools are testTools plus unload_tool_group and a third group.
func catalogTools(r *tools.Registry) error {
	if err := testTools(r); err != nil {
		return err
	}
	if err := r.Add(tools.UnloadGroup(r)); err != nil {
		return err
	}
	return r.AddGroup(tools.Group{Name: "notes", DisplayName: "Notes", Description: "Keep notes"},
		tools.New(tools.Definition{Name: "notes_add", Description: "Add a note to the notebook"}, echoRun("notes_add")),
		tools.New(tools.Definition{Name: "notes_list", Description: "List the notes in the notebook"}, echoRun("notes_list")))
}

func echoRun(name string) func(context.Context, echoIn) (any, error) {
	return func(ctx context.Context, in echoIn) (any, error) {
		return map[string]string{"tool": name, "echo": in.Text}, nil
	}
}

// TEST: a group unloaded leaves the catalog from the next request on, and
// a restart rebuilds the catalog without it, in the same order as before.
func TestUnloadToolGroup(t *testing.T) {
	e := storetest.NewEnv(t, storetest.Options{Register: catalogTools})
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Call("load_tool_group", `{"group_name":"mail"}`)
	e.Model.Call("load_tool_group", `{"group_name":"notes"}`)
	e.Model.Call("unload_tool_group", `{"group_name":"mail"}`)
	e.Model.Call("unload_tool_group", `{"group_name":"mail"}`)
	e.Model.Text("done")
	send(t, e, "c1", "juggle groups")
	reqs := e.Model.Requests()
	core := []string{"load_tool_group", "ping", "unload_tool_group"}
	if got := chattest.ToolNames(reqs[3]); !slices.Equal(got, append(slices.Clone(core), "pdf_info", "pdf_extract_text", "mail_search", "mail_send", "mail_read", "notes_add", "notes_list")) {
		t.Fatalf("tools before the unload = %v", got)
	}
	if got := lastResult(t, reqs[4]); !strings.Contains(got, "Unloaded tool group 'mail'") {
		t.Errorf("unload result = %s", got)
	}
	if got := lastResult(t, reqs[5]); !strings.Contains(got, "is not loaded; nothing changed") {
		t.Errorf("second unload result = %s", got)
	}
	after := append(slices.Clone(core), "pdf_info", "pdf_extract_text", "notes_add", "notes_list")
	if got := chattest.ToolNames(reqs[4]); !slices.Equal(got, after) {
		t.Fatalf("tools after the unload = %v, want %v", got, after)
	}
	if err := e.Store.Close(); err != nil {
		t.Fatal(err)
	}
	second := storetest.NewEnv(t, storetest.Options{Register: catalogTools, DBPath: e.DBPath})
	second.Model.Call("mail_read", `{}`)
	second.Model.Text("ok")
	send(t, second, "c1", "read mail")
	reqs = second.Model.Requests()
	if got := chattest.ToolNames(reqs[0]); !slices.Equal(got, after) {
		t.Fatalf("tools after a restart = %v, want %v", got, after)
	}
	if got := lastResult(t, reqs[1]); !strings.Contains(got, "not_loaded") {
		t.Errorf("a tool of the unloaded group = %s", got)
	}
}

// groupTokens is a group's schema estimate as the engine makes it with
// its default count.
func groupTokens(r *tools.Registry, group string) int {
	n := 0
	for _, d := range r.GroupTools(group, nil) {
		n += (len(tools.SchemaText(d)) + 3) / 4
	}
	return n
}

// TEST: a load beyond tools.catalog_budget unloads the least recently
// used group (not the oldest loaded one), says so in the result, and the
// record makes a restart agree.
func TestCatalogBudgetUnloadsLeastRecentlyUsed(t *testing.T) {
	probe := storetest.NewEnv(t, storetest.Options{Register: catalogTools})
	r := probe.Registry
	pdf, mail, notes := groupTokens(r, "pdf"), groupTokens(r, "mail"), groupTokens(r, "notes")
	budget := pdf + mail + notes - 1
	e := storetest.NewEnv(t, storetest.Options{Register: catalogTools, Config: chat.Config{CatalogBudget: budget}})
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Call("load_tool_group", `{"group_name":"mail"}`)
	e.Model.Call("pdf_info", `{}`) // pdf is now used more recently than mail
	e.Model.Call("load_tool_group", `{"group_name":"notes"}`)
	e.Model.Text("done")
	send(t, e, "c1", "load three")
	reqs := e.Model.Requests()
	got := lastResult(t, reqs[4])
	if !strings.Contains(got, "Loaded 2 tools from group 'Notes'") || !strings.Contains(got, "(least recently used first): mail.") {
		t.Fatalf("load result = %s", got)
	}
	want := []string{"load_tool_group", "ping", "unload_tool_group", "pdf_info", "pdf_extract_text", "notes_add", "notes_list"}
	if names := chattest.ToolNames(reqs[4]); !slices.Equal(names, want) {
		t.Fatalf("tools after the load = %v, want %v", names, want)
	}
	groups, err := e.Store.LoadedGroups(t.Context(), 1)
	if err != nil || !slices.Equal(groups, []string{"pdf", "notes"}) {
		t.Fatalf("stored groups = %v, %v", groups, err)
	}
	// Under the budget nothing is unloaded.
	roomy := storetest.NewEnv(t, storetest.Options{Register: catalogTools, Config: chat.Config{CatalogBudget: budget + 1}})
	roomy.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	roomy.Model.Call("load_tool_group", `{"group_name":"mail"}`)
	roomy.Model.Call("load_tool_group", `{"group_name":"notes"}`)
	roomy.Model.Text("done")
	send(t, roomy, "c1", "load three")
	if got := lastResult(t, roomy.Model.Requests()[3]); strings.Contains(got, "Unloaded") {
		t.Fatalf("a load within the budget unloaded: %s", got)
	}
}

// requestParts splits a request body into the history (messages after the
// system prompt) and everything else, the system prompt included, as
// bytes.
func requestParts(t *testing.T, body []byte) (rest []byte, history []json.RawMessage) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(m["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	m["messages"] = msgs[0]
	// Re-encoding a map of raw values keeps each value's bytes and sorts
	// the keys, so only the values are compared.
	rest, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return rest, msgs[1:]
}

// TEST: providers cache the longest identical prefix of a request. Two
// consecutive requests of a session are byte-identical apart from the
// history, which only grows; loading a group appends its tools after
// those already sent; a restart sends the same bytes again.
func TestRequestsKeepThePromptCache(t *testing.T) {
	e := storetest.NewEnv(t, storetest.Options{Register: catalogTools, Config: chat.Config{SystemPrompt: "Be brief."}})
	e.Model.Call("load_tool_group", `{"group_name":"notes"}`)
	e.Model.Text("loaded")
	send(t, e, "c1", "load notes")
	e.Model.Text("hello")
	send(t, e, "c1", "hi")
	e.Model.Call("load_tool_group", `{"group_name":"mail"}`)
	e.Model.Text("loaded")
	send(t, e, "c1", "load mail")
	bodies := e.Model.Bodies()
	if len(bodies) != 5 {
		t.Fatalf("%d requests", len(bodies))
	}
	// Requests 1 and 2 (after notes was loaded, across two turns) differ
	// only in the history, which grew at the end.
	rest1, hist1 := requestParts(t, bodies[1])
	rest2, hist2 := requestParts(t, bodies[2])
	if !bytes.Equal(rest1, rest2) {
		t.Fatalf("requests differ beyond the history:\n%s\n%s", rest1, rest2)
	}
	if len(hist2) <= len(hist1) {
		t.Fatalf("history did not grow: %d then %d", len(hist1), len(hist2))
	}
	for i := range hist1 {
		if !bytes.Equal(hist1[i], hist2[i]) {
			t.Fatalf("history message %d changed:\n%s\n%s", i, hist1[i], hist2[i])
		}
	}
	// Loading mail appends its tools: the earlier array is a prefix.
	tools2, tools4 := toolsArray(t, bodies[2]), toolsArray(t, bodies[4])
	if !bytes.HasPrefix(tools4, tools2[:len(tools2)-1]) || len(tools4) <= len(tools2) {
		t.Fatalf("loading a group did not only append:\n%s\n%s", tools2, tools4)
	}
	if s2, s4 := systemOf(t, bodies[2]), systemOf(t, bodies[4]); !bytes.Equal(s2, s4) {
		t.Fatalf("system prompt changed between turns:\n%s\n%s", s2, s4)
	}
	// After a restart the same session sends the same tools and prompt.
	if err := e.Store.Close(); err != nil {
		t.Fatal(err)
	}
	second := storetest.NewEnv(t, storetest.Options{Register: catalogTools, DBPath: e.DBPath, Config: chat.Config{SystemPrompt: "Be brief."}})
	second.Model.Text("back")
	send(t, second, "c1", "again")
	after := second.Model.Bodies()[0]
	if !bytes.Equal(toolsArray(t, after), tools4) || !bytes.Equal(systemOf(t, after), systemOf(t, bodies[4])) {
		t.Fatalf("a restart changed the request's tools or system prompt:\n%s\n%s", toolsArray(t, after), tools4)
	}
}

func toolsArray(t *testing.T, body []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m["tools"]
}

func systemOf(t *testing.T, body []byte) []byte {
	t.Helper()
	var m struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &m); err != nil || len(m.Messages) == 0 {
		t.Fatalf("no messages: %v", err)
	}
	return m.Messages[0]
}

// TEST: /status's figures: each loaded group's schema tokens in load
// order, the core's share, what routing all would send, and the
// provider's usage summed, cached prompt tokens included; each model
// call's usage is kept with the message it wrote.
func TestStatusAccountsForTokens(t *testing.T) {
	e := storetest.NewEnv(t, storetest.Options{Register: catalogTools})
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{{Name: "load_tool_group", Arguments: `{"group_name":"notes"}`}},
		Usage: chat.Usage{PromptTokens: 100, CompletionTokens: 10}})
	e.Model.Push(chattest.Step{Calls: []chat.ToolCall{{Name: "load_tool_group", Arguments: `{"group_name":"pdf"}`}},
		Usage: chat.Usage{PromptTokens: 200, CompletionTokens: 20, CachedTokens: 90}})
	e.Model.Push(chattest.Step{Text: "ready", Usage: chat.Usage{PromptTokens: 300, CompletionTokens: 30, CachedTokens: 190}})
	send(t, e, "c1", "load two")
	s, err := e.Engine.Status(t.Context(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Usage != (chat.Usage{PromptTokens: 600, CompletionTokens: 60, CachedTokens: 280}) {
		t.Errorf("usage = %+v", s.Usage)
	}
	count := func(text string) int { return (len(text) + 3) / 4 }
	r := e.Registry
	want := []chat.GroupCost{
		{Name: "notes", Tools: 2, Tokens: tools.SchemaTokens(r.GroupTools("notes", nil), count)},
		{Name: "pdf", Tools: 2, Tokens: tools.SchemaTokens(r.GroupTools("pdf", nil), count)},
	}
	if !slices.Equal(s.Groups, want) {
		t.Errorf("groups = %+v, want %+v", s.Groups, want)
	}
	core := tools.SchemaTokens(r.Core(nil), count)
	if s.CoreTokens != core || s.SchemaTokens != core+want[0].Tokens+want[1].Tokens || s.ActiveTools != 7 {
		t.Errorf("request = %d tools, %d tokens (core %d)", s.ActiveTools, s.SchemaTokens, s.CoreTokens)
	}
	if all := r.All(nil); s.AllTools != len(all) || s.AllTokens != tools.SchemaTokens(all, count) || s.AllTools != 10 {
		t.Errorf("routing all = %d tools, %d tokens", s.AllTools, s.AllTokens)
	}
	var per []chat.Usage
	rows, err := e.Store.Gorm().Raw("SELECT prompt_tokens, completion_tokens, cached_tokens FROM messages WHERE role = 'assistant' ORDER BY id").Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var u chat.Usage
		if err := rows.Scan(&u.PromptTokens, &u.CompletionTokens, &u.CachedTokens); err != nil {
			t.Fatal(err)
		}
		per = append(per, u)
	}
	if !slices.Equal(per, []chat.Usage{{100, 10, 0}, {200, 20, 90}, {300, 30, 190}}) {
		t.Errorf("usage per model call = %+v", per)
	}
}
