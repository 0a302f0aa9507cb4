package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"loadout/tokens"
)

type in struct {
	Name  string   `json:"name" desc:"a name"`
	Count int      `json:"count,omitempty"`
	Kind  string   `json:"kind,omitempty" enum:"a,b"`
	Tags  []string `json:"tags,omitempty"`
}

func tool(name string) Tool {
	return New(Definition{Name: name, Description: "test tool " + name},
		func(ctx context.Context, v in) (any, error) { return v, nil })
}

func TestSchemaFromStruct(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Schema(in{}), &s); err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	if req := s["required"].([]any); len(req) != 1 || req[0] != "name" {
		t.Errorf("required = %v", req)
	}
	if props["count"].(map[string]any)["type"] != "integer" || props["tags"].(map[string]any)["type"] != "array" {
		t.Errorf("props = %v", props)
	}
	if props["name"].(map[string]any)["description"] != "a name" || len(props["kind"].(map[string]any)["enum"].([]any)) != 2 {
		t.Errorf("props = %v", props)
	}
}

func TestRegistryRejectsBadAndDuplicateNames(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(tool("Bad-Name")); err == nil {
		t.Error("invalid name accepted")
	}
	if err := r.Add(tool(strings.Repeat("a", 65))); err == nil {
		t.Error("65-character name accepted")
	}
	if err := r.Add(tool("alpha")); err != nil {
		t.Fatal(err)
	}
	err := r.AddGroup(Group{Name: "g1", DisplayName: "G1"}, tool("alpha"))
	if err == nil || !strings.Contains(err.Error(), "group g1") || !strings.Contains(err.Error(), "core") {
		t.Errorf("duplicate tool error = %v; want both sources named", err)
	}
	r.AddGroup(Group{Name: "g2", DisplayName: "Two"}, tool("beta"))
	err = r.AddGroup(Group{Name: "g2", DisplayName: "Other"}, tool("gamma"))
	if err == nil || !strings.Contains(err.Error(), `"Two"`) || !strings.Contains(err.Error(), `"Other"`) {
		t.Errorf("duplicate group error = %v", err)
	}
	if err := r.AddGroup(Group{Name: "alpha"}); err == nil || !strings.Contains(err.Error(), "core") {
		t.Errorf("group named like a tool: %v", err)
	}
}

func TestCatalogAndListing(t *testing.T) {
	r := NewRegistry()
	r.Add(LoadGroup(r), tool("core_one"))
	r.AddGroup(Group{Name: "g1", Description: "first group"}, tool("g1_a"), tool("g1_b"))
	r.AddGroup(Group{Name: "g2", Description: "second group"}, tool("g2_a"))
	c := r.Catalog(false, []string{"g2", "unknown", "g2"}, map[string]bool{"core_one": true})
	var names []string
	for _, d := range c.Definitions() {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "load_tool_group,g2_a" {
		t.Errorf("catalog = %v", names)
	}
	if !c.Has("g2_a") || c.Has("g1_a") || c.Has("core_one") {
		t.Error("Has disagrees with Definitions")
	}
	if len(r.Catalog(true, nil, nil).Definitions()) != 5 {
		t.Error("routing all misses tools")
	}
	l := r.Listing(map[string]bool{"g2_a": true})
	if !strings.HasPrefix(l, "## Available Tool Groups") || !strings.Contains(l, "- g1: first group") || strings.Contains(l, "g2") {
		t.Errorf("listing = %q", l)
	}
}

func run1(t *testing.T, x *Executor, cat *Catalog, ctx context.Context, name, args string) Result {
	t.Helper()
	return x.Run(ctx, cat, []Call{{ID: "1", Name: name, Arguments: args}})[0]
}

func code(t *testing.T, r Result) string {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal([]byte(r.Content), &e); err != nil {
		t.Fatalf("content %q: %v", r.Content, err)
	}
	if r.Status != StatusError || e["status"] != "error" || e["code"] != r.Code {
		t.Fatalf("not a structured error: %+v", r)
	}
	return r.Code
}

func TestExecutorChecksArguments(t *testing.T) {
	r := NewRegistry()
	r.Add(tool("t"))
	x := NewExecutor(r, nil)
	cat := r.Catalog(false, nil, nil)
	ctx := context.Background()
	cases := []struct{ args, code, msg string }{
		{`{"name": 1}`, CodeInvalidArgument, "must be a string"},
		{`{"count": 1}`, CodeMissingParameter, "'name'"},
		{`{"name":"x","count":1.5}`, CodeInvalidArgument, "integer"},
		{`{"name":"x","kind":"c"}`, CodeInvalidArgument, "one of a, b"},
		{`{"name":"x","tags":[1]}`, CodeInvalidArgument, "tags[0]"},
		{`{"name":`, CodeInvalidArgument, "not valid JSON"},
		{`[1]`, CodeInvalidArgument, "object"},
	}
	for _, c := range cases {
		res := run1(t, x, cat, ctx, "t", c.args)
		if code(t, res) != c.code || !strings.Contains(res.Content, c.msg) {
			t.Errorf("args %s: %s", c.args, res.Content)
		}
	}
	ok := run1(t, x, cat, ctx, "t", `{"name":"x","count":2,"kind":"a","tags":["q"]}`)
	if ok.Status != StatusSuccess || !strings.Contains(ok.Content, `"count":2`) {
		t.Errorf("valid call = %+v", ok)
	}
	empty := run1(t, x, cat, ctx, "t", ``)
	if code(t, empty) != CodeMissingParameter {
		t.Errorf("empty arguments = %+v", empty)
	}
}

func TestErrorMessageIsCapped(t *testing.T) {
	r := NewRegistry()
	r.Add(New(Definition{Name: "long", Description: "x"}, func(context.Context, struct{}) (any, error) {
		return nil, &Error{Code: CodeInvalidArgument, Message: strings.Repeat("é", 5000), Details: map[string]any{"allowed_actions": []string{"a"}}}
	}))
	res := run1(t, NewExecutor(r, nil), nil, context.Background(), "long", `{}`)
	var e struct {
		Message        string
		AllowedActions []string `json:"allowed_actions"`
	}
	json.Unmarshal([]byte(res.Content), &e)
	if n := len([]rune(e.Message)); n != MaxErrorMessage {
		t.Errorf("message has %d characters, want %d", n, MaxErrorMessage)
	}
	if len(e.AllowedActions) != 1 {
		t.Errorf("details lost: %s", res.Content[:100])
	}
}

func TestMiddlewareOrder(t *testing.T) {
	r := NewRegistry()
	r.Add(tool("t"))
	var trace []string
	mw := func(name string) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, c Call) Result {
				trace = append(trace, name+">")
				res := next(ctx, c)
				trace = append(trace, "<"+name)
				return res
			}
		}
	}
	run1(t, NewExecutor(r, nil, mw("outer"), mw("inner")), nil, context.Background(), "t", `{"name":"x"}`)
	if strings.Join(trace, " ") != "outer> inner> <inner <outer" {
		t.Errorf("trace = %v", trace)
	}
}

func TestLoadGroupEmptyWhenAllDisabled(t *testing.T) {
	r := NewRegistry()
	r.Add(LoadGroup(r))
	r.AddGroup(Group{Name: "g", Description: "d"}, tool("g_a"))
	ctx := WithCaller(context.Background(), Caller{Disabled: map[string]bool{"g_a": true}})
	res := run1(t, NewExecutor(r, nil), nil, ctx, LoadGroupName, `{"group_name":"g"}`)
	if code(t, res) != CodeEmptyGroup || !strings.Contains(res.Content, "Tool group 'g' has no available tools.") {
		t.Errorf("result = %s", res.Content)
	}
	res = run1(t, NewExecutor(r, nil), nil, context.Background(), LoadGroupName, `{"group_name":" "}`)
	if code(t, res) != CodeMissingParameter {
		t.Errorf("blank group = %s", res.Content)
	}
}

func TestValidNameMatchesThePattern(t *testing.T) {
	re := regexp.MustCompile(namePattern)
	for _, name := range []string{"", "a", "get_current_time", "A", "1a", "_a", "a-b", "a b", "aé", "a" + strings.Repeat("b", 63), "a" + strings.Repeat("b", 64), "x9_", "z\n"} {
		if got, want := validName(name), re.MatchString(name); got != want {
			t.Errorf("validName(%q) = %v, the pattern says %v", name, got, want)
		}
	}
}

func TestCapResultsCutsLongResultsInLinearTime(t *testing.T) {
	r := NewRegistry()
	big := strings.Repeat("é", 1<<20) // 1 MB of two-byte runes and more
	if err := r.Add(New(Definition{Name: "big", Description: "big", Timeout: time.Second},
		func(ctx context.Context, in struct{}) (any, error) { return big, nil })); err != nil {
		t.Fatal(err)
	}
	res := NewExecutor(r, nil, CapResults(1000)).Run(context.Background(), nil, []Call{{ID: "1", Name: "big"}})[0]
	if res.Status != StatusSuccess || !strings.HasPrefix(res.Content, strings.Repeat("é", 1000)+"\n[cut: the result had 1048576 characters") {
		t.Fatalf("got %d bytes: %.200q", len(res.Content), res.Content)
	}
	if !utf8.ValidString(res.Content) || strings.Count(res.Content, "é") != 1000 {
		t.Fatal("the cut split a character or kept more than the cap")
	}
	small := NewExecutor(r, nil, CapResults(1<<21)).Run(context.Background(), nil, []Call{{ID: "1", Name: "big"}})[0]
	if small.Content != big {
		t.Fatal("a result under the cap was changed")
	}
}

func TestWindow(t *testing.T) {
	text := "héllo wörld"
	for _, c := range []struct {
		offset, max int
		part        string
		next        int
	}{{0, 5, "héllo", 5}, {5, 5, " wörl", 10}, {10, 5, "d", 0}, {11, 5, "", 0}, {0, 100, text, 0}} {
		part, total, next := Window(text, c.offset, c.max)
		if part != c.part || total != 11 || next != c.next {
			t.Errorf("Window(%d, %d) = %q %d %d", c.offset, c.max, part, total, next)
		}
	}
}

// However many groups there are, and whatever their names and
// descriptions, the listing stays within 240 tokens (o200k): the first
// groups with their descriptions, then names, then a count.
func TestListingIsBounded(t *testing.T) {
	count, err := tokens.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range []string{strings.Repeat("a long description ", 4), "Read, write, list and delete files in this workspace", "x"} {
		r := NewRegistry()
		for i := 0; i < 300; i++ {
			name := fmt.Sprintf("mcp_server_%03d_tools", i)
			tool := New(Definition{Name: name + "_tool", Description: "d"}, func(ctx context.Context, in struct{}) (any, error) { return nil, nil })
			if err := r.AddGroup(Group{Name: name, Description: desc}, tool); err != nil {
				t.Fatal(err)
			}
		}
		l := r.Listing(nil)
		n := count.Count(l)
		t.Logf("%d tokens", n)
		if n > 240 || !strings.Contains(l, "- mcp_server_000_tools: "+desc) || !strings.Contains(l, "- Also: mcp_server_") ||
			!strings.HasSuffix(l, "more groups: find_tools finds their tools.") {
			t.Errorf("listing of %d tokens:\n%s", n, l)
		}
	}
}

func TestReplaceGroup(t *testing.T) {
	r := NewRegistry()
	mk := func(name string) Tool {
		return New(Definition{Name: name, Description: name}, func(ctx context.Context, in struct{}) (any, error) { return name, nil })
	}
	if err := r.Add(mk("core_tool")); err != nil {
		t.Fatal(err)
	}
	if err := r.AddGroup(Group{Name: "custom", Description: "made in chats"}, mk("old_tool")); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for _, d := range r.Catalog(false, []string{"custom"}, nil).Definitions() {
			out = append(out, d.Name)
		}
		return out
	}
	if err := r.ReplaceGroup(Group{Name: "custom", Description: "made in chats"}, mk("new_tool"), mk("second_tool")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(), ","); got != "core_tool,new_tool,second_tool" {
		t.Fatalf("catalog after the replacement: %s", got)
	}
	x := NewExecutor(r, nil)
	res := x.Run(context.Background(), nil, []Call{{ID: "1", Name: "new_tool"}, {ID: "2", Name: "old_tool"}})
	if res[0].Content != "new_tool" || res[1].Code != CodeNotFound {
		t.Errorf("calls after the replacement: %+v", res)
	}
	if err := r.ReplaceGroup(Group{Name: "custom"}, mk("core_tool")); err == nil {
		t.Fatal("a tool named like a core tool replaced the group")
	}
	if got := strings.Join(names(), ","); got != "core_tool,new_tool,second_tool" {
		t.Errorf("a failed replacement changed the registry: %s", got)
	}
	// Readers and a writer at once (run with -race).
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				r.Catalog(false, []string{"custom"}, nil)
				r.Listing(nil)
			}
		}()
	}
	for j := 0; j < 50; j++ {
		if err := r.ReplaceGroup(Group{Name: "custom", Description: "d"}, mk(fmt.Sprintf("tool_%d", j))); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// find_tools ranks the tools for a request, never offers a disabled tool
// or a group the caller may not load, and follows the registry's changes.
func TestFindTools(t *testing.T) {
	r := NewRegistry()
	mk := func(name, desc string) Tool {
		return New(Definition{Name: name, Description: desc}, func(ctx context.Context, in struct{}) (any, error) { return nil, nil })
	}
	r.Add(LoadGroup(r), FindTools(r))
	r.AddGroup(Group{Name: "mail", Description: "Email"}, mk("mail_send", "Send an email"), mk("mail_search", "Search emails"))
	r.AddGroup(Group{Name: "secret", Description: "Admin things", Admit: func(context.Context) bool { return false }}, mk("secret_send", "Send an email as admin"))
	find := func(disabled map[string]bool, args string) Result {
		ctx := WithCaller(context.Background(), Caller{Disabled: disabled})
		return NewExecutor(r, nil).Run(ctx, nil, []Call{{ID: "1", Name: FindToolsName, Arguments: args}})[0]
	}
	res := find(nil, `{"query":"send an email to Ana","load":true}`)
	if !strings.HasPrefix(res.Content, "- mail_send (mail): Send an email") || strings.Contains(res.Content, "secret") ||
		len(res.Groups) != 1 || res.Groups[0] != (GroupChange{Name: "mail"}) {
		t.Fatalf("find: %+v", res)
	}
	if res := find(map[string]bool{"mail_send": true}, `{"query":"send an email"}`); strings.Contains(res.Content, "mail_send") {
		t.Errorf("a disabled tool was offered: %s", res.Content)
	}
	r.ReplaceGroup(Group{Name: "calendar", Description: "Events"}, mk("calendar_move", "Move an event to another time"))
	if res := find(nil, `{"query":"move my meeting"}`); !strings.Contains(res.Content, "calendar_move") {
		t.Errorf("a group added later is not found: %s", res.Content)
	}
	if res := find(nil, `{"query":"zebra xylophone"}`); res.Code != CodeNotFound {
		t.Errorf("nothing fits: %+v", res)
	}
	// A slip of the keyboard still finds its tool.
	if res := find(nil, `{"query":"serch my emials"}`); !strings.HasPrefix(res.Content, "- mail_search (mail)") {
		t.Errorf("a misspelt request: %s", res.Content)
	}
}

// find_tools reads a request the way people write one: its verb picks
// among a group's tools, a day or an hour is any day or hour, a link, a
// mail address or a file name is known by its shape, a tool's name
// weighs more than a common word, and what no tool knows of goes to the
// catch-all.
func TestFindToolsReadsRequests(t *testing.T) {
	r := NewRegistry()
	noop := func(ctx context.Context, in struct{}) (any, error) { return nil, nil }
	mk := func(d Definition) Tool { return New(d, noop) }
	r.Add(LoadGroup(r), FindTools(r),
		mk(Definition{Name: "lookup", Description: "Look something up.", Catchall: true, ReadOnly: true,
			Examples: []string{"open the page at this link"}}))
	// Three tools alike but for their verb.
	r.AddGroup(Group{Name: "notes", Description: "Notes"},
		mk(Definition{Name: "notes_search", Description: "Notes by words.", ReadOnly: true, Examples: []string{"the note about the boiler"}}),
		mk(Definition{Name: "notes_create", Description: "A new note.", Examples: []string{"a note on the car"}}),
		mk(Definition{Name: "notes_delete", Description: "A note, gone.", Examples: []string{"the note of the dentist"}}))
	r.AddGroup(Group{Name: "agenda", Description: "Plans"},
		mk(Definition{Name: "agenda_list", Description: "Plans ahead.", ReadOnly: true, Examples: []string{"plans for Monday morning"}}))
	r.AddGroup(Group{Name: "docs", Description: "Documents"},
		mk(Definition{Name: "docs_text", Description: "A document.", ReadOnly: true}),
		mk(Definition{Name: "docs_info", Description: "A document's text size, text encoding and text language.", ReadOnly: true,
			Examples: []string{"the text details of a document", "how much text a document has"}}))
	r.AddGroup(Group{Name: "people", Description: "People"},
		mk(Definition{Name: "people_add", Description: "Save someone's email address."}))
	r.AddGroup(Group{Name: "store", Description: "Workspace"},
		mk(Definition{Name: "store_write", Description: "Save a file."}))
	r.AddGroup(Group{Name: "memo", Description: "Memos"}, // alike but for their effect
		mk(Definition{Name: "memo_delete", Description: "Memos."}),
		mk(Definition{Name: "memo_list", Description: "Memos.", ReadOnly: true}))
	r.AddGroup(Group{Name: "calls", Description: "Phone"},
		mk(Definition{Name: "calls_log", Description: "Calls made.", ReadOnly: true, Examples: []string{"the calls from Pedro"}}))
	find := func(q string) string {
		args, _ := json.Marshal(map[string]string{"query": q})
		return NewExecutor(r, nil).Run(context.Background(), nil, []Call{{ID: "1", Name: FindToolsName, Arguments: string(args)}})[0].Content
	}
	for _, c := range []struct{ why, query, first string }{
		{"the verb picks the tool", "get rid of the note", "notes_delete"},
		{"the verb picks the tool", "jot down a note", "notes_create"},
		{"the verb picks the tool", "look up a note", "notes_search"},
		{"a few words without a verb ask to look", "memos today", "memo_list"},
		{"any day is a day", "what is on thursday evening", "agenda_list"},
		{"a link by its shape", "summarize https://example.org/post", "lookup"},
		{"a mail address by its shape", "save ana@example.com", "people_add"},
		{"a file name by its shape", "save this as plan.md", "store_write"},
		{"a name outweighs a common word", "the text of the document", "docs_text"},
		{"the catch-all answers what no tool knows", "the capital of australia", "lookup"},
		{"which person an example names pulls nothing", "save Pedro", "people_add"},
		{"a famous name is a question about the world", "how tall is Marta Vieira", "lookup"},
	} {
		if got := find(c.query); !strings.HasPrefix(got, "- "+c.first+" (") {
			t.Errorf("%s: %q found\n%s", c.why, c.query, got)
		}
	}
	// A word that is a verb as often as a noun is the request's verb
	// only where a verb stands.
	if got := find("notes about the trip plan"); strings.HasPrefix(got, "- notes_create") {
		t.Errorf("'plan' was read as a verb:\n%s", got)
	}
	// Only a request's first words are read: each word no tool has is
	// compared with every tool word, so a long one must cost no more.
	if got := find(strings.Repeat("zzyzx ", maxQueryWords) + "delete the note"); strings.Contains(got, "notes_delete") {
		t.Errorf("a word past the first %d was read:\n%s", maxQueryWords, got)
	}
}

// TEST (effects too low): a tool whose name or description's verb says
// it sends, deletes, shares, forwards or trashes cannot be registered
// read-only, so a new group cannot slip one past the approval policy;
// declaring its effect, or deciding it per call, registers it.
func TestRegistryRefusesAReadOnlyToolThatSaysItActs(t *testing.T) {
	noop := func(context.Context, struct{}) (any, error) { return "ok", nil }
	for _, d := range []Definition{
		{Name: "mail_send", Description: "Mail", ReadOnly: true},
		{Name: "notes_purge", Description: "Deletes notes.", ReadOnly: true},
		{Name: "doc_share", Description: "Share a document", ReadOnly: true},
		{Name: "mail_forward", Description: "Forward mail", ReadOnly: true},
		{Name: "bin", Description: "Trash a file", ReadOnly: true},
	} {
		err := NewRegistry().Add(New(d, noop))
		if err == nil || !strings.Contains(err.Error(), d.Name) || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s registered: %v", d.Name, err)
		}
	}
	for _, d := range []Definition{
		{Name: "mail_send", Description: "Mail", Effect: EffectDestructive},
		{Name: "files_op", Description: "Delete or read a file", ReadOnly: true,
			EffectFor: func(context.Context, any) Effect { return EffectDestructive }},
		{Name: "forwarding_list", Description: "List the forwarding addresses", ReadOnly: true},
	} {
		if err := NewRegistry().Add(New(d, noop)); err != nil {
			t.Errorf("%s refused: %v", d.Name, err)
		}
	}
}

func TestOneEdit(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"serch", "search", true}, {"calender", "calendar", true}, {"emial", "email", true}, {"mail", "mails", true},
		{"mail", "mail", false}, {"mail", "main", true}, {"search", "sarch", true}, {"abc", "cab", false}, {"form", "from", true},
		{"drive", "dive", true}, {"sheet", "sheets", true}, {"sheet", "shelves", false},
	} {
		if got := oneEdit(c.a, c.b); got != c.want {
			t.Errorf("oneEdit(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// PerTurn keeps a value for the turn's calls, not past the turn, and
// keeps no error.
func TestPerTurn(t *testing.T) {
	n := 0
	f := func() (int, error) { n++; return n, nil }
	turn := WithTurn(context.Background())
	a, _ := PerTurn(turn, "k", f)
	b, _ := PerTurn(withMemo(turn), "k", f) // another call of the turn
	if a != 1 || b != 1 {
		t.Fatalf("the turn's calls got %d and %d", a, b)
	}
	if c, _ := PerTurn(WithTurn(context.Background()), "k", f); c != 2 {
		t.Fatalf("the next turn got %d", c)
	}
	fails := 0
	g := func() (int, error) { fails++; return 0, errors.New("down") }
	PerTurn(turn, "e", g)
	PerTurn(turn, "e", g)
	if fails != 2 {
		t.Fatalf("an error was kept: %d tries", fails)
	}
}

// TEST: fold agrees with strings.EqualFold on every rune: the runes of one
// case-folding orbit have the same fold, and it is one of them (so runes
// of different orbits have different folds).
func TestFoldIsEqualFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		want := fold(string(r))
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if got := fold(string(f)); got != want {
				t.Fatalf("fold(%q) = %q, fold(%q) = %q", f, got, r, want)
			}
		}
		if w := []rune(want); len(w) != 1 || !strings.EqualFold(string(w[0]), string(r)) {
			t.Fatalf("fold(%q) = %q, not the same letter", r, want)
		}
	}
	if fold("recipientſ") != fold("RECIPIENTS") || fold("url") == fold("uri") {
		t.Fatal("fold does not tell names apart as EqualFold does")
	}
}
