package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
)

type echoIn struct {
	Text string `json:"text,omitempty" desc:"text to echo"`
}

// testTools registers a core tool and two groups, pdf and mail.
func testTools(r *tools.Registry) error {
	echo := func(name, desc string) tools.Tool {
		// A tool that says it sends cannot be declared read-only.
		return tools.New(tools.Definition{Name: name, Description: desc, ReadOnly: tools.ActingWord(tools.Definition{Name: name}) == ""},
			func(ctx context.Context, in echoIn) (any, error) {
				return map[string]string{"tool": name, "echo": in.Text}, nil
			})
	}
	if err := r.Add(echo("ping", "Answer pong.")); err != nil {
		return err
	}
	if err := r.AddGroup(tools.Group{Name: "pdf", DisplayName: "PDF", Description: "Read PDF files"},
		echo("pdf_info", "PDF metadata"), echo("pdf_extract_text", "PDF text")); err != nil {
		return err
	}
	return r.AddGroup(tools.Group{Name: "mail", DisplayName: "Mail", Description: "Search and send mail"},
		echo("mail_search", "Search mail"), echo("mail_send", "Send mail"), echo("mail_read", "Read mail"))
}

func newEnv(t *testing.T, cfg chat.Config) *storetest.Env {
	return storetest.NewEnv(t, storetest.Options{Config: cfg, Register: testTools})
}

func send(t *testing.T, e *storetest.Env, chatKey, text string) chat.Reply {
	t.Helper()
	r, err := e.Engine.Handle(context.Background(), chat.Inbound{ChatKey: chatKey, UserKey: "u:" + chatKey, Text: text})
	if err != nil {
		t.Fatalf("Handle(%q): %v", text, err)
	}
	return r
}

// toolResults returns the tool messages of a request keyed by call id.
func toolResults(req goopenai.ChatCompletionRequest) map[string]string {
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Content
		}
	}
	return out
}

// lastResult returns the content of the last tool message of a request.
func lastResult(t *testing.T, req goopenai.ChatCompletionRequest) string {
	t.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "tool" {
			return req.Messages[i].Content
		}
	}
	t.Fatal("request has no tool message")
	return ""
}

func errorCode(t *testing.T, content string) string {
	t.Helper()
	var e struct {
		Status, Code, Message string
	}
	if err := json.Unmarshal([]byte(content), &e); err != nil || e.Status != "error" {
		t.Fatalf("not a structured error: %s", content)
	}
	return e.Code
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func wantTools(t *testing.T, req goopenai.ChatCompletionRequest, want ...string) {
	t.Helper()
	if got := sorted(chattest.ToolNames(req)); !slices.Equal(got, sorted(want)) {
		t.Fatalf("tools sent = %v, want %v", got, sorted(want))
	}
}

// TEST-040-01, TEST-040-02
func TestFirstMessageCarriesCoreToolsAndListing(t *testing.T) {
	e := newEnv(t, chat.Config{SystemPrompt: "Be brief."})
	e.Model.Text("hello")
	if r := send(t, e, "c1", "hi"); r.Text != "hello" {
		t.Fatalf("reply = %q", r.Text)
	}
	req := e.Model.Last(t)
	wantTools(t, req, "load_tool_group", "ping")
	sys := chattest.System(req)
	for _, s := range []string{"Be brief.", "## Available Tool Groups", "- pdf: Read PDF files", "- mail: Search and send mail", "load_tool_group"} {
		if !strings.Contains(sys, s) {
			t.Errorf("system prompt lacks %q:\n%s", s, sys)
		}
	}
}

// TEST-040-03, TEST-040-09, TEST-040-13
func TestLoadWidensCatalogWithinTurn(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Call("pdf_info", `{"text":"a.pdf"}`)
	e.Model.Text("it is a PDF")
	send(t, e, "c1", "what is a.pdf?")
	reqs := e.Model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model calls = %d, want 3", len(reqs))
	}
	wantTools(t, reqs[0], "load_tool_group", "ping")
	wantTools(t, reqs[1], "load_tool_group", "ping", "pdf_info", "pdf_extract_text")
	loadResult := lastResult(t, reqs[1])
	for _, s := range []string{"Loaded 2 tools from group 'PDF'", "- pdf_info: PDF metadata", "- pdf_extract_text: PDF text"} {
		if !strings.Contains(loadResult, s) {
			t.Errorf("load result lacks %q: %s", s, loadResult)
		}
	}
	if got := lastResult(t, reqs[2]); !strings.Contains(got, `"tool":"pdf_info"`) || !strings.Contains(got, "a.pdf") {
		t.Errorf("pdf_info result = %s", got)
	}
}

// TEST-040-04 and the other load_tool_group errors.
func TestLoadErrors(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Call("load_tool_group", `{"group_name":"nonexistent"}`)
	e.Model.Call("load_tool_group", `{}`)
	e.Model.Text("sorry")
	send(t, e, "c1", "load stuff")
	reqs := e.Model.Requests()
	notFound := lastResult(t, reqs[1])
	if errorCode(t, notFound) != "not_found" || !strings.Contains(notFound, "Available groups: pdf, mail") {
		t.Errorf("unknown group result = %s", notFound)
	}
	if c := errorCode(t, lastResult(t, reqs[2])); c != "missing_parameter" {
		t.Errorf("missing group_name code = %s", c)
	}
	wantTools(t, reqs[2], "load_tool_group", "ping")
}

// TEST-040-05, TEST-040-06, FEAT-044: groups persist across messages.
func TestGroupsPersistAcrossMessages(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Call("load_tool_group", `{"group_name":"mail"}`)
	e.Model.Text("loaded mail")
	send(t, e, "c1", "check mail")
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Text("loaded pdf")
	send(t, e, "c1", "and pdfs")
	e.Model.Call("mail_send", `{"text":"hi"}`)
	e.Model.Text("sent")
	n := len(e.Model.Requests())
	send(t, e, "c1", "send it")
	reqs := e.Model.Requests()[n:]
	wantTools(t, reqs[0], "load_tool_group", "ping", "mail_search", "mail_send", "mail_read", "pdf_info", "pdf_extract_text")
	if got := lastResult(t, reqs[1]); !strings.Contains(got, `"tool":"mail_send"`) {
		t.Errorf("mail_send without reloading: %s", got)
	}
	// Another chat is unaffected.
	e.Model.Text("hi")
	send(t, e, "c2", "hello")
	wantTools(t, e.Model.Last(t), "load_tool_group", "ping")
}

// TEST-040-07 and two loads in one parallel batch.
func TestDuplicateLoadsAreIdempotent(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`, "load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Text("ok")
	send(t, e, "c1", "load pdf twice")
	reqs := e.Model.Requests()
	for id, content := range toolResults(reqs[1]) {
		if !strings.HasPrefix(content, "Loaded 2 tools") {
			t.Errorf("parallel load %s = %s", id, content)
		}
	}
	if len(toolResults(reqs[1])) != 2 {
		t.Fatalf("want two results in the batch, got %v", toolResults(reqs[1]))
	}
	wantTools(t, reqs[1], "load_tool_group", "ping", "pdf_info", "pdf_extract_text")
	wantTools(t, reqs[2], "load_tool_group", "ping", "pdf_info", "pdf_extract_text")
	groups, err := e.Store.LoadedGroups(context.Background(), 1)
	if err != nil || !slices.Equal(groups, []string{"pdf"}) {
		t.Fatalf("LoadedGroups = %v, %v", groups, err)
	}
}

// TEST-040-08: with 100+ tools registered only the core ones are sent.
func TestManyToolsOnlyCoreSent(t *testing.T) {
	e := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		if err := testTools(r); err != nil {
			return err
		}
		for g := 0; g < 10; g++ {
			var ts []tools.Tool
			for i := 0; i < 10; i++ {
				ts = append(ts, tools.New(tools.Definition{Name: fmt.Sprintf("g%d_tool%d", g, i), Description: "x"},
					func(context.Context, echoIn) (any, error) { return "ok", nil }))
			}
			if err := r.AddGroup(tools.Group{Name: fmt.Sprintf("g%d", g), Description: "generated"}, ts...); err != nil {
				return err
			}
		}
		return nil
	}})
	if n := len(e.Registry.All(nil)); n < 100 {
		t.Fatalf("registered %d tools, want 100+", n)
	}
	send(t, e, "c1", "hi")
	wantTools(t, e.Model.Last(t), "load_tool_group", "ping")
}

// TEST-040-12: a grouped tool before its group is loaded.
func TestGroupedToolBlockedBeforeLoad(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Call("pdf_info", `{}`, "no_such_tool", `{}`)
	e.Model.Text("ok")
	send(t, e, "c1", "info")
	res := toolResults(e.Model.Last(t))
	var notLoaded, notFound string
	for _, c := range res {
		switch errorCode(t, c) {
		case "not_loaded":
			notLoaded = c
		case "not_found":
			notFound = c
		}
	}
	if !strings.Contains(notLoaded, "'pdf'") || !strings.Contains(notLoaded, "load_tool_group") {
		t.Errorf("not_loaded result = %q", notLoaded)
	}
	if !strings.Contains(notFound, "no_such_tool") {
		t.Errorf("not_found result = %q", notFound)
	}
}

// FEAT-044: /clear starts a session with core tools only.
func TestClearStartsFreshSession(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Text("ok")
	send(t, e, "c1", "load")
	if open, err := e.Engine.Clear(context.Background(), "c1"); err != nil || !open {
		t.Fatalf("Clear = %v, %v", open, err)
	}
	e.Model.Text("fresh")
	send(t, e, "c1", "hello again")
	req := e.Model.Last(t)
	wantTools(t, req, "load_tool_group", "ping")
	for _, m := range req.Messages {
		if m.Content == "load" {
			t.Error("old session's message was sent after /clear")
		}
	}
	st, err := e.Engine.Status(context.Background(), "c1")
	if err != nil || len(st.Loaded) != 0 || st.Messages != 2 {
		t.Fatalf("status after clear = %+v, %v", st, err)
	}
}

// /clear tells what a tool holds for the chat (a browser), once the
// session is closed, in order, whether a session was open or not.
func TestClearTellsOnClear(t *testing.T) {
	var told []string
	e := newEnv(t, chat.Config{OnClear: []func(context.Context, string){
		func(_ context.Context, chatKey string) { told = append(told, "first "+chatKey) },
		func(_ context.Context, chatKey string) { told = append(told, "second "+chatKey) },
	}})
	e.Model.Text("ok")
	send(t, e, "c1", "hello")
	if _, err := e.Engine.Clear(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if open, err := e.Engine.Clear(context.Background(), "c1"); err != nil || open {
		t.Fatalf("Clear again = %v, %v", open, err)
	}
	if got := strings.Join(told, ", "); got != "first c1, second c1, first c1, second c1" {
		t.Errorf("told: %s", got)
	}
}

// A restart: a new engine on the same file sends the loaded group's
// schemas in its very first request.
func TestRestartKeepsLoadedGroups(t *testing.T) {
	first := newEnv(t, chat.Config{})
	first.Model.Call("load_tool_group", `{"group_name":"mail"}`)
	first.Model.Text("loaded")
	send(t, first, "telegram:1", "load mail")
	if err := first.Store.Close(); err != nil {
		t.Fatal(err)
	}
	second := storetest.NewEnv(t, storetest.Options{Register: testTools, DBPath: first.DBPath})
	second.Model.Call("mail_search", `{"text":"invoices"}`)
	second.Model.Text("found")
	send(t, second, "telegram:1", "search invoices")
	reqs := second.Model.Requests()
	wantTools(t, reqs[0], "load_tool_group", "ping", "mail_search", "mail_send", "mail_read")
	if got := lastResult(t, reqs[1]); !strings.Contains(got, "invoices") {
		t.Errorf("mail_search after restart = %s", got)
	}
}

func TestRoutingAllSendsEverything(t *testing.T) {
	e := newEnv(t, chat.Config{Routing: chat.RoutingAll})
	e.Model.Call("mail_read", `{}`)
	e.Model.Text("ok")
	send(t, e, "c1", "hi")
	reqs := e.Model.Requests()
	wantTools(t, reqs[0], "load_tool_group", "ping", "pdf_info", "pdf_extract_text", "mail_search", "mail_send", "mail_read")
	if strings.Contains(chattest.System(reqs[0]), "Available Tool Groups") {
		t.Error("routing all should not list groups")
	}
	if got := lastResult(t, reqs[1]); !strings.Contains(got, `"tool":"mail_read"`) {
		t.Errorf("grouped tool under routing all = %s", got)
	}
}

func TestMaxToolRounds(t *testing.T) {
	e := newEnv(t, chat.Config{MaxToolRounds: 3})
	for i := 0; i < 5; i++ {
		e.Model.Call("ping", fmt.Sprintf(`{"text":"%d"}`, i))
	}
	r := send(t, e, "c1", "loop")
	if got := len(e.Model.Requests()); got != 3 {
		t.Fatalf("model calls = %d, want 3", got)
	}
	if !strings.Contains(r.Text, "3 rounds") {
		t.Errorf("reply = %q", r.Text)
	}
}

func TestRepeatedFailingCallStops(t *testing.T) {
	e := newEnv(t, chat.Config{})
	for i := 0; i < 10; i++ {
		// Same tool, same arguments in another key order: one call.
		if i%2 == 0 {
			e.Model.Call("mail_send", `{"text":"x"}`)
		} else {
			e.Model.Call("mail_send", `{ "text": "x" }`)
		}
	}
	r := send(t, e, "c1", "send")
	if got := len(e.Model.Requests()); got != 3 {
		t.Fatalf("model calls = %d, want 3 (stop at the third identical failure)", got)
	}
	if !strings.Contains(r.Text, "mail_send") || !strings.Contains(r.Text, "3 times") {
		t.Errorf("reply = %q", r.Text)
	}
	// The guard's reply is persisted as the turn's answer.
	msgs, _ := e.Store.Recent(context.Background(), 1, 100)
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleAssistant || last.Text != r.Text {
		t.Errorf("last persisted = %+v", last)
	}
}

func TestModelFaultsAreRetried(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Fail(http.StatusTooManyRequests)
	e.Model.Garbled()
	e.Model.Text("finally")
	if r := send(t, e, "c1", "hi"); r.Text != "finally" {
		t.Fatalf("reply = %q", r.Text)
	}
	if n := len(e.Model.Requests()); n != 3 {
		t.Fatalf("attempts = %d, want 3", n)
	}
}

func TestModelDownGivesPlainSentenceAndKeepsMessage(t *testing.T) {
	e := newEnv(t, chat.Config{})
	for i := 0; i < 3; i++ {
		e.Model.Fail(http.StatusBadGateway)
	}
	r := send(t, e, "c1", "are you there?")
	if !strings.Contains(r.Text, "can't reach the language model") {
		t.Fatalf("reply = %q", r.Text)
	}
	msgs, err := e.Store.Recent(context.Background(), 1, 10)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "are you there?" {
		t.Fatalf("persisted = %+v, %v", msgs, err)
	}
	// The next message carries the earlier one.
	e.Model.Text("yes")
	send(t, e, "c1", "hello?")
	var texts []string
	for _, m := range e.Model.Last(t).Messages {
		texts = append(texts, m.Content)
	}
	if !slices.Contains(texts, "are you there?") {
		t.Errorf("earlier message lost: %v", texts)
	}
}

func TestNonRetryableModelErrorIsNotRetried(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Fail(http.StatusUnauthorized)
	r := send(t, e, "c1", "hi")
	if n := len(e.Model.Requests()); n != 1 {
		t.Fatalf("attempts = %d, want 1", n)
	}
	if !strings.Contains(r.Text, "Sorry") {
		t.Errorf("reply = %q", r.Text)
	}
}

func TestTrimmingKeepsToolPairs(t *testing.T) {
	e := newEnv(t, chat.Config{HistoryTokens: 1000, ToolResultChars: 200})
	for i := 0; i < 8; i++ {
		e.Model.Call("ping", fmt.Sprintf(`{"text":"%s"}`, strings.Repeat("y", 300)))
		e.Model.Text(strings.Repeat("answer ", 20))
		send(t, e, "c1", fmt.Sprintf("question %d %s", i, strings.Repeat("z", 100)))
	}
	req := e.Model.Last(t)
	if len(req.Messages) >= 8*4 {
		t.Fatalf("history not trimmed: %d messages", len(req.Messages))
	}
	pending := map[string]bool{}
	for i, m := range req.Messages {
		switch m.Role {
		case "assistant":
			for _, c := range m.ToolCalls {
				pending[c.ID] = true
			}
		case "tool":
			if !pending[m.ToolCallID] {
				t.Fatalf("message %d: tool result %s without its call", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
		default:
			if len(pending) > 0 {
				t.Fatalf("message %d: calls %v without results before a %s message", i, pending, m.Role)
			}
		}
	}
	// Earlier turns' long results are shortened; this turn's is whole.
	var shortened, whole int
	for _, m := range req.Messages {
		if m.Role == "tool" {
			if strings.Contains(m.Content, "shortened") {
				shortened++
			} else {
				whole++
			}
		}
	}
	if whole != 1 || shortened == 0 {
		t.Errorf("whole=%d shortened=%d, want 1 and >0", whole, shortened)
	}
}

func TestToolPanicAndBadArgumentsAreStructuredErrors(t *testing.T) {
	e := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		return r.Add(
			tools.New(tools.Definition{Name: "boom", Description: "panics"},
				func(context.Context, echoIn) (any, error) { panic("kaboom") }),
			tools.New(tools.Definition{Name: "slow", Description: "sleeps", Timeout: 20 * time.Millisecond},
				func(ctx context.Context, in echoIn) (any, error) { <-ctx.Done(); return nil, ctx.Err() }),
			tools.New(tools.Definition{Name: "typed", Description: "typed"},
				func(context.Context, struct {
					N int `json:"n"`
				}) (any, error) {
					return "ok", nil
				}),
		)
	}})
	e.Model.Call("boom", `{}`, "slow", `{}`, "typed", `{"n": 1`, "typed", `{"n":"one"}`, "typed", `{}`)
	e.Model.Text("done")
	send(t, e, "c1", "go")
	req := e.Model.Last(t)
	var codes []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			codes = append(codes, errorCode(t, m.Content))
			if len(m.Content) > 1200 {
				t.Errorf("error result too long: %d", len(m.Content))
			}
		}
	}
	want := []string{"internal", "timeout", "invalid_argument", "invalid_argument", "missing_parameter"}
	if !slices.Equal(codes, want) {
		t.Fatalf("codes = %v, want %v", codes, want)
	}
}

func TestChatsShareTheEngine(t *testing.T) {
	e := newEnv(t, chat.Config{})
	e.Model.Fallback = "ok"
	var wg sync.WaitGroup
	// One chat's messages come one at a time (bridge.Pipeline orders
	// them); different chats share the engine at once.
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				send(t, e, fmt.Sprintf("chat%d", c), fmt.Sprintf("m%d", i))
			}
		}()
	}
	wg.Wait()
	// Each chat's history alternates user/assistant: no turn interleaved
	// with another of the same chat.
	for c := 0; c < 4; c++ {
		sess, err := e.Store.OpenSession(context.Background(), fmt.Sprintf("chat%d", c))
		if err != nil {
			t.Fatal(err)
		}
		msgs, _ := e.Store.Recent(context.Background(), sess.ID, 100)
		if len(msgs) != 10 {
			t.Fatalf("chat%d has %d messages", c, len(msgs))
		}
		for i, m := range msgs {
			want := chat.RoleUser
			if i%2 == 1 {
				want = chat.RoleAssistant
			}
			if m.Role != want {
				t.Fatalf("chat%d message %d role %s, want %s", c, i, m.Role, want)
			}
		}
	}
}

func TestStatusReportsSession(t *testing.T) {
	e := newEnv(t, chat.Config{Model: "m1"})
	e.Model.Call("load_tool_group", `{"group_name":"pdf"}`)
	e.Model.Text("ok")
	send(t, e, "c1", "load")
	st, err := e.Engine.Status(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 4 || !slices.Equal(st.Loaded, []string{"pdf"}) || st.ActiveTools != 4 ||
		st.SchemaTokens == 0 || st.Usage.PromptTokens != 20 || st.Usage.CompletionTokens != 10 || st.Model != "m1" {
		t.Fatalf("status = %+v", st)
	}
}

// The in-memory history must send exactly what a read from the store sends.
func TestHistoryCacheMatchesStore(t *testing.T) {
	script := func(e *storetest.Env) []goopenai.ChatCompletionRequest {
		for i := 0; i < 6; i++ {
			e.Model.Call("load_tool_group", `{"group_name":"mail"}`)
			e.Model.Call("mail_search", fmt.Sprintf(`{"text":"%s"}`, strings.Repeat("q", 500*i)))
			e.Model.Text(fmt.Sprintf("answer %d", i))
			send(t, e, "c1", fmt.Sprintf("question %d", i))
		}
		return e.Model.Requests()
	}
	cached := script(newEnv(t, chat.Config{HistoryTokens: 1200}))
	uncached := script(newEnv(t, chat.Config{HistoryTokens: 1200, CachedSessions: -1}))
	a, _ := json.Marshal(cached)
	b, _ := json.Marshal(uncached)
	if string(a) != string(b) {
		t.Fatal("requests differ between cached and store-read history")
	}
}

// A write the engine did not make (another process on the same file)
// invalidates the cached history.
func TestHistoryCacheNoticesOtherWriters(t *testing.T) {
	e := newEnv(t, chat.Config{})
	send(t, e, "c1", "first")
	sess, _ := e.Store.OpenSession(context.Background(), "c1")
	if err := e.Store.Append(context.Background(), sess.ID, []chat.Message{{Role: chat.RoleUser, Text: "written elsewhere", Tokens: 5}}, chat.Usage{}); err != nil {
		t.Fatal(err)
	}
	send(t, e, "c1", "second")
	var texts []string
	for _, m := range e.Model.Last(t).Messages {
		texts = append(texts, m.Content)
	}
	if !slices.Contains(texts, "written elsewhere") || !slices.Contains(texts, "first") {
		t.Fatalf("history = %v", texts)
	}
}

// A turn cut at shutdown still persists what ran and tells the person.
func TestCancelledTurnKeepsRecord(t *testing.T) {
	started := make(chan struct{})
	e := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "wait", Description: "waits"},
			func(ctx context.Context, _ struct{}) (any, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			}))
	}})
	e.Model.Call("wait", `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	r, err := e.Engine.Handle(ctx, chat.Inbound{ChatKey: "c1", UserKey: "u", Text: "wait please"})
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if !strings.Contains(r.Text, "shutting down") {
		t.Errorf("reply = %q", r.Text)
	}
	msgs, _ := e.Store.Recent(context.Background(), 1, 10)
	if len(msgs) != 3 || msgs[2].Role != chat.RoleTool || msgs[2].Code != "timeout" {
		t.Fatalf("persisted = %+v", msgs)
	}
}

func TestInternalErrorsReachOnlyTheLog(t *testing.T) {
	const url = "https://10.1.2.3:8443/v1/secrets?key=abc"
	const token = "ya29.a0AfH6SMBxSecretToken"
	var logs chattest.LogBuffer
	e := storetest.NewEnv(t, storetest.Options{
		Config: chat.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Register: func(r *tools.Registry) error {
			return r.Add(
				tools.New(tools.Definition{Name: "leaky", Description: "fails with internals"},
					func(context.Context, echoIn) (any, error) {
						return nil, fmt.Errorf("post %s: bearer %s: %w", url, token, errors.New("database is locked"))
					}),
				tools.New(tools.Definition{Name: "boom", Description: "panics"},
					func(context.Context, echoIn) (any, error) { panic("open " + url) }),
			)
		},
	})
	e.Model.Call("leaky", `{}`, "boom", `{}`)
	e.Model.Text("done")
	send(t, e, "c1", "go")
	req := e.Model.Last(t)
	var refs []string
	for _, m := range req.Messages {
		if m.Role != "tool" {
			continue
		}
		for _, secret := range []string{"10.1.2.3", "secrets", token, "locked", "panic"} {
			if strings.Contains(m.Content, secret) {
				t.Errorf("the model received %q: %s", secret, m.Content)
			}
		}
		var r struct{ Code, Ref string }
		if err := json.Unmarshal([]byte(m.Content), &r); err != nil || r.Code != "internal" || len(r.Ref) != 8 {
			t.Fatalf("result %s: want code internal with an 8-character ref", m.Content)
		}
		refs = append(refs, r.Ref)
	}
	if len(refs) != 2 || refs[0] == refs[1] {
		t.Fatalf("refs = %v, want two different ones", refs)
	}
	out := logs.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "ref="+refs[0]) && (!strings.Contains(line, url) || !strings.Contains(line, token)) {
			t.Errorf("log line for %s lacks the error: %s", refs[0], line)
		}
	}
	if !strings.Contains(out, "ref="+refs[0]) || !strings.Contains(out, "ref="+refs[1]) || !strings.Contains(out, "stack=") {
		t.Fatalf("log lacks the refs or the panic's stack:\n%s", out)
	}
}

func TestHugeRoundIsCappedAndSaved(t *testing.T) {
	var ran atomic.Int64
	e := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "count", Description: "counts"},
			func(context.Context, echoIn) (any, error) { ran.Add(1); return "ok", nil }))
	}})
	const asked = 2500
	pairs := make([]string, 0, 2*asked)
	for i := range asked {
		pairs = append(pairs, "count", fmt.Sprintf(`{"text":"%d"}`, i))
	}
	e.Model.Call(pairs...)
	e.Model.Text("batched")
	if r := send(t, e, "c1", "go"); r.Text != "batched" {
		t.Fatalf("reply = %q", r.Text)
	}
	if n := ran.Load(); n != 32 {
		t.Fatalf("%d calls ran, want the default cap of 32", n)
	}
	results := toolResults(e.Model.Last(t))
	skipped := 0
	for _, c := range results {
		if strings.Contains(c, `"too_many_calls"`) {
			skipped++
		}
	}
	if len(results) != asked || skipped != asked-32 {
		t.Fatalf("%d results, %d skipped; want %d and %d", len(results), skipped, asked, asked-32)
	}
	// The whole round was saved: user, assistant, 2,500 results, answer.
	s, err := e.Store.OpenSession(context.Background(), "c1")
	if err != nil || s.Messages != asked+3 {
		t.Fatalf("session has %d messages (%v), want %d", s.Messages, err, asked+3)
	}
}

func TestMaxToolCallsIsConfigurable(t *testing.T) {
	e := newEnv(t, chat.Config{MaxToolCalls: 1})
	e.Model.Call("ping", `{}`, "ping", `{"text":"b"}`)
	e.Model.Text("done")
	send(t, e, "c1", "go")
	var codes []string
	for _, m := range e.Model.Last(t).Messages {
		if m.Role == "tool" {
			if strings.Contains(m.Content, `"status":"error"`) {
				codes = append(codes, errorCode(t, m.Content))
			} else {
				codes = append(codes, "ok")
			}
		}
	}
	if !slices.Equal(codes, []string{"ok", "too_many_calls"}) {
		t.Fatalf("results = %v", codes)
	}
}

func TestMisconfiguredModelIsNamedNotRetried(t *testing.T) {
	for _, tc := range []struct {
		status  int
		setting string
		reply   string
		log     string
	}{
		{http.StatusUnauthorized, "", "rejected its API key", "llm.api_key"},
		{http.StatusForbidden, "", "rejected its API key", "llm.api_key"},
		{http.StatusNotFound, "", "does not know the model", "check llm.model"},
		{http.StatusNotFound, "gpt-nope", "does not know the model", "agent_config"},
		{http.StatusBadGateway, "", "try again in a minute", "model call failed"},
	} {
		var logs chattest.LogBuffer
		e := storetest.NewEnv(t, storetest.Options{Config: chat.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
		if tc.setting != "" {
			if err := e.Store.SetChatSetting(context.Background(), "c1", tools.SettingModel, tc.setting); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			e.Model.Fail(tc.status)
		}
		r := send(t, e, "c1", "hi")
		want := 1
		if tc.status >= 500 {
			want = 3 // the fake client's attempts
		}
		if n := len(e.Model.Requests()); n != want {
			t.Errorf("%d: %d requests, want %d", tc.status, n, want)
		}
		if !strings.Contains(r.Text, tc.reply) || !strings.HasPrefix(r.Text, "Sorry") {
			t.Errorf("%d: reply %q lacks %q", tc.status, r.Text, tc.reply)
		}
		if !strings.Contains(logs.String(), tc.log) || !strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("%d: log lacks %q:\n%s", tc.status, tc.log, logs.String())
		}
	}
}
