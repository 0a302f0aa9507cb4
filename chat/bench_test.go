package chat_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/store"
	"loadout/tools"
)

// instantModel answers at once, so the benchmark measures the engine and
// the store, not a network.
type instantModel struct{ tools int }

func (m *instantModel) Complete(_ context.Context, req chat.Request) (chat.Response, error) {
	m.tools = len(req.Tools)
	return chat.Response{Text: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

// testEngineParts opens a store with open in a directory of tb's, and a
// registry with load_tool_group and the test tools; the store is closed
// when tb ends.
func testEngineParts(tb testing.TB, open func(string) (*store.DB, error)) (*store.DB, *tools.Registry) {
	tb.Helper()
	db, err := open(filepath.Join(tb.TempDir(), "bench.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	reg := tools.NewRegistry()
	if err := reg.Add(tools.LoadGroup(reg)); err != nil {
		tb.Fatal(err)
	}
	if err := testTools(reg); err != nil {
		tb.Fatal(err)
	}
	return db, reg
}

// BenchmarkHandle sends one message through the engine into a session that
// already holds n messages, one of them an early load_tool_group. The
// "warm" runs keep the recent history in memory between messages (the
// steady state of a live chat); the "cold" runs read the history window
// from SQLite on every message (the first message after a restart). Run:
//
//	go test -run '^$' -bench BenchmarkHandle -benchmem ./chat/
func BenchmarkHandle(b *testing.B) {
	// capped is warm with daily spend caps and prices set: the spend
	// read before the model call and the charge after it; monthly adds
	// a monthly cap, which reads the month's rows.
	for _, mode := range []string{"warm", "cold", "capped", "monthly"} {
		for _, n := range []int{10, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/history=%d", mode, n), func(b *testing.B) { benchHandle(b, mode, n) })
		}
	}
}

func benchHandle(b *testing.B, mode string, n int) {
	{
		{
			db, reg := testEngineParts(b, store.Open)
			ctx := context.Background()
			sess, err := db.OpenSession(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			seed(b, db, sess.ID, n)
			model := &instantModel{}
			cfg := chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if mode == "cold" {
				cfg.CachedSessions = -1
			}
			if mode == "capped" || mode == "monthly" {
				cfg.Limits = chat.Limits{DailyTokensPerPerson: 1 << 40, DailyTokensPerChat: 1 << 40, DailyCostPerPerson: 1e9}
				cfg.Prices = map[string]chat.Price{"": {Input: 0.15, Output: 0.6}}
				cfg.Ledger = db
				if mode == "monthly" {
					cfg.Limits.MonthlyTokensPerPerson = 1 << 40
					seedSpend(b, db)
				}
			}
			e := chat.New(cfg, model, db, reg)
			in := chat.Inbound{ChatKey: "bench", UserKey: "u", Text: "hello there"}
			var last int64
			db.Gorm().Raw("SELECT MAX(id) FROM messages").Scan(&last)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.Handle(ctx, in); err != nil {
					b.Fatal(err)
				}
				// Keep the history at n messages: drop this turn's two.
				b.StopTimer()
				if err := db.Gorm().Exec("DELETE FROM messages WHERE id > ?", last).Error; err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			if model.tools != 5 { // load_tool_group, ping + mail's three
				b.Fatalf("model saw %d tools; the early load was not found", model.tools)
			}
		}
	}
}

// seed writes n messages: a load of "mail" first, then user/assistant
// pairs, in batches.
func seed(b *testing.B, db *store.DB, sessionID int64, n int) {
	ctx := context.Background()
	msgs := []chat.Message{
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c0", Name: "load_tool_group", Arguments: `{"group_name":"mail"}`}}, Tokens: 10},
		{Role: chat.RoleTool, ToolCallID: "c0", ToolName: "load_tool_group", Status: tools.StatusSuccess, Groups: tools.LoadChanges("mail"), Text: "Loaded 3 tools", Tokens: 10},
	}
	for len(msgs) < n {
		role := chat.RoleUser
		if len(msgs)%2 == 1 {
			role = chat.RoleAssistant
		}
		msgs = append(msgs, chat.Message{Role: role, Text: "some earlier message text of ordinary length", Tokens: 12})
	}
	for i := 0; i < len(msgs); i += 500 {
		end := min(i+500, len(msgs))
		if err := db.Append(ctx, sessionID, msgs[i:end], chat.Usage{}); err != nil {
			b.Fatal(err)
		}
	}
}

// seedSpend charges "u" in three chats on each day of the month so
// far, as a month of use leaves the spends table.
func seedSpend(b *testing.B, db *store.DB) {
	now := time.Now().UTC()
	for d := 1; d <= now.Day(); d++ {
		day := time.Date(now.Year(), now.Month(), d, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
		for _, c := range []string{"bench", "other", "group"} {
			if err := db.Charge(context.Background(), chat.Charge{UserKey: "u", ChatKey: c, Day: day, Spend: chat.Spend{PromptTokens: 100}}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// loadCountingStore counts the loaded-groups queries.
type loadCountingStore struct {
	chat.Store
	loadedReads atomic.Int32
}

func (c *loadCountingStore) LoadedGroups(ctx context.Context, sessionID int64) ([]string, error) {
	c.loadedReads.Add(1)
	return c.Store.LoadedGroups(ctx, sessionID)
}

// A warm chat's loaded groups come with its cached history: the store is
// asked once, at the first message, and the group loaded then is offered
// on the next message without asking again.
func TestWarmTurnsTakeLoadedGroupsFromTheCache(t *testing.T) {
	db, reg := testEngineParts(t, store.OpenTest)
	m := chattest.NewModelServer(t)
	m.Call("load_tool_group", `{"group_name":"mail"}`)
	m.Text("loaded")
	m.Text("second")
	cs := &loadCountingStore{Store: db}
	e := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, m.Client(), cs, reg)
	for _, text := range []string{"load mail", "again"} {
		if _, err := e.Handle(context.Background(), chat.Inbound{ChatKey: "c", UserKey: "u", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if got := chattest.ToolNames(m.Last(t)); !slices.Contains(got, "mail_send") {
		t.Fatalf("the second message was offered %v, without the loaded group", got)
	}
	if n := cs.loadedReads.Load(); n != 1 {
		t.Errorf("the store was asked for loaded groups %d times, want once", n)
	}
}

// With Config.Images set, the pictures named in the message go to the
// model as image input with that message only; the history keeps its text.
func TestPicturesGoWithTheirMessage(t *testing.T) {
	db, err := store.OpenTest(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := tools.NewRegistry()
	reg.Add(tools.LoadGroup(reg))
	m := chattest.NewModelServer(t)
	var asked []string
	e := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Images: func(ctx context.Context, chatKey, name string) (chat.Image, error) {
			asked = append(asked, chatKey+"/"+name)
			return chat.Image{MIME: "image/png", Data: []byte("png!")}, nil
		}}, m.Client(), db, reg)
	ctx := context.Background()
	if _, err := e.Handle(ctx, chat.Inbound{ChatKey: "c", UserKey: "u", Text: "what is this?", Images: []string{"cat.png"}}); err != nil {
		t.Fatal(err)
	}
	msgs := m.Last(t).Messages
	parts := msgs[len(msgs)-1].MultiContent
	if len(parts) != 2 || parts[0].Text != "what is this?" || parts[1].ImageURL == nil || parts[1].ImageURL.URL != "data:image/png;base64,cG5nIQ==" {
		t.Fatalf("the message went as %+v", msgs[len(msgs)-1])
	}
	if len(asked) != 1 || asked[0] != "c/cat.png" {
		t.Errorf("pictures read: %v", asked)
	}
	if _, err := e.Handle(ctx, chat.Inbound{ChatKey: "c", UserKey: "u", Text: "and now?"}); err != nil {
		t.Fatal(err)
	}
	for _, msg := range m.Last(t).Messages {
		if len(msg.MultiContent) > 0 {
			t.Errorf("a picture was sent again with a later message: %+v", msg)
		}
	}
}

// callingModel asks for one call of ping, then answers in text, turn
// after turn: a turn with one round of tool calls.
type callingModel struct{ n int }

func (m *callingModel) Complete(_ context.Context, req chat.Request) (chat.Response, error) {
	m.n++
	if m.n%2 == 1 {
		return chat.Response{ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("c%d", m.n), Name: "ping", Arguments: `{"text":"x"}`}},
			Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
	}
	return chat.Response{Text: "pong", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

// BenchmarkToolRound sends one message whose turn makes one tool call
// (the gate reads the person's rules once per round) and answers. Run:
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkToolRound -benchmem ./chat/
func BenchmarkToolRound(b *testing.B) {
	db, reg := testEngineParts(b, store.Open)
	e := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, &callingModel{}, db, reg)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%200 == 0 {
			// A short history, as in a chat cleared now and then.
			b.StopTimer()
			if _, err := e.Clear(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if _, err := e.Handle(ctx, chat.Inbound{ChatKey: "bench", UserKey: "u", Text: "ping it"}); err != nil {
			b.Fatal(err)
		}
	}
}
