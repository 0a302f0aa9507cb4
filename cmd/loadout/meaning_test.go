package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/settings"
	"loadout/store"
	"loadout/tools"
)

// embeddingsConfig is the config section of embeddings on the fake.
func embeddingsConfig(fake *chattest.EmbeddingsServer) string {
	return fmt.Sprintf("embeddings:\n  model: fake-embed\n  base_url: %s/v1\n  api_key: test\n", fake.URL)
}

// In `loadout chat` with embeddings on, a memory and an earlier
// conversation are found by a paraphrase none of whose words they have;
// /status shows the embedding's progress and cost; and the embeddings'
// tokens count against the caps at the embedding model's price.
func TestMemoryAndHistoryByMeaningInTheConsole(t *testing.T) {
	model := chattest.NewModelServer(t)
	fake := chattest.NewEmbeddingsServer(t)
	prices := "  prices:\n    fake: {input: 0, output: 0}\n    fake-embed: {input: 1000000}\nlimits:\n  daily_cost_per_person: 1000000\n"
	cfgPath, _ := writeConfig(t, model.URL, embeddingsConfig(fake))
	raw, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte(strings.Replace(string(raw), "  model: fake\n", "  model: fake\n"+prices, 1)), 0o600)
	model.Call("memory", `{"action":"save","text":"My physician is Dr. Ruiz"}`)
	model.Text("Noted.")
	if out, err := runCLI(t, "my physician is Dr. Ruiz, and we booked the flat in Lisbon for our vacation\n/clear\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Noted.") {
		t.Fatalf("%v\n%s", err, out)
	}
	model.Call("memory", `{"action":"search","query":"doctor"}`)
	model.Text("Dr. Ruiz.")
	model.Call("load_tool_group", `{"group_name":"history"}`)
	model.Call("search_history", `{"query":"holiday apartment"}`)
	model.Text("The flat in Lisbon.")
	out, err := runCLI(t, "who is my doctor?\nwhere did we stay on holiday?\n/status\n", "-config", cfgPath, "chat")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var memoryResult, historyResult string
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && strings.Contains(m.Content, `"memories"`) {
				memoryResult = m.Content
			}
			if m.Role == "tool" && strings.Contains(m.Content, `"results"`) {
				historyResult = m.Content
			}
		}
	}
	if !strings.Contains(memoryResult, "Dr. Ruiz") {
		t.Errorf("the memory search gave %s", memoryResult)
	}
	if !strings.Contains(historyResult, "flat in Lisbon") {
		t.Errorf("search_history gave %s", historyResult)
	}
	if !strings.Contains(out, "Search by meaning: fake-embed, ") || !strings.Contains(out, "memories and messages embedded") {
		t.Errorf("/status lacks search by meaning:\n%s", out)
	}
	// The model is free here; every cost is the embeddings'.
	if i := strings.Index(out, "Spent today: "); i < 0 || strings.HasPrefix(out[i:], "Spent today: 0.00 by you") {
		t.Errorf("/status shows no spend on embeddings:\n%s", out)
	}
}

// The same paraphrase by words alone finds nothing, and says so plainly;
// with the embeddings service down, the search runs by words and says
// that meaning was not searched.
func TestMemorySearchByWordsSaysWhatItDid(t *testing.T) {
	model := chattest.NewModelServer(t)
	fake := chattest.NewEmbeddingsServer(t)
	words, _ := writeConfig(t, model.URL, "")
	meaning, _ := writeConfig(t, model.URL, embeddingsConfig(fake))
	for _, c := range []struct {
		cfg, want string
		fail      bool
	}{
		{words, "Nothing found by these words. Try other words.", false},
		{meaning, "search by meaning is unavailable right now", true},
	} {
		fake.Fail(c.fail)
		model.Call("memory", `{"action":"save","text":"My physician is Dr. Ruiz"}`)
		model.Call("memory", `{"action":"search","query":"doctor"}`)
		model.Text("Done.")
		if out, err := runCLI(t, "remember my physician and find my doctor\n", "-config", c.cfg, "chat"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if got := lastToolResult(model); !strings.Contains(got, c.want) || strings.Contains(got, "Ruiz") {
			t.Errorf("fail %v: the search gave %s", c.fail, got)
		}
		if c.cfg == words && fake.Requests() != 0 {
			t.Errorf("without the embeddings section the service was asked %d times", fake.Requests())
		}
	}
}

// find_tools with embeddings on asks the service for the tools' texts
// once and for each request, and the requests and tokens show in
// /metrics and on the console's overview.
func TestFindToolsByMeaningAndItsMetrics(t *testing.T) {
	fake := chattest.NewEmbeddingsServer(t)
	cfg, _ := settings.Parse([]byte(embeddingsConfig(fake)), env(nil))
	cfg.Store.Path = t.TempDir() + "/x.db"
	a, err := buildApp(context.Background(), cfg, quietLog(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	find, _ := a.reg.Tool(tools.FindToolsName)
	x := tools.NewExecutor(a.reg, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local", UserKey: "console:local"})
	for range 2 {
		r := x.Run(ctx, nil, []tools.Call{{ID: "1", Name: find.Name, Arguments: `{"query":"remember that my spouse is Sam"}`}})[0]
		if !strings.HasPrefix(r.Content, "- memory (core)") {
			t.Errorf("find_tools gave %s", r.Content)
		}
	}
	tools := len(a.reg.All(nil)) - 3 // not the catalog's own three
	if n := fake.Texts(); n != int64(tools+2) {
		t.Errorf("%d texts embedded for %d tools and two requests", n, tools)
	}
	// The console's overview: the job has nothing to embed yet; the
	// requests and tokens are find_tools'.
	if st := a.overview(ctx); !strings.HasPrefix(st.Meaning, "Search by meaning: fake-embed, 0 of 0 memories and messages embedded; 3 requests, ") {
		t.Errorf("the overview says %q", st.Meaning)
	}
	srv := httptest.NewServer(a.mux)
	defer srv.Close()
	m := scrape(t, srv.URL+"/metrics")
	for _, want := range []string{`loadout_embedding_requests_total{model="fake-embed",outcome="ok"}`, `loadout_embedding_tokens_total{model="fake-embed"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The embedding job keeps its place in the store: `loadout serve` killed
// (SIGKILL) half way through embedding a person's memories resumes where
// it stopped when started again, and embeds no memory twice.
func TestEmbeddingJobResumesAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs loadout serve twice")
	}
	fake := chattest.NewEmbeddingsServer(t)
	model := chattest.NewModelServer(t)
	cfgPath, dbPath := writeConfig(t, model.URL, embeddingsConfig(fake)+"  batch_size: 10\nhttp:\n  listen: 127.0.0.1:0\ncluster:\n  lease: 3s\n")
	ctx := context.Background()
	db, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 200
	for i := range rows {
		if _, err := db.SaveMemory(ctx, "telegram:1", fmt.Sprintf("fact number %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	db.SetMeaning(&store.Meaning{Model: "fake-embed", Embedder: fake.Client("fake-embed", openai.EmbedOptions{})})
	defer db.Close()
	progress := func() store.EmbedProgress {
		p, err := db.EmbedProgress(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fake.HoldAfter(rows / 2)
	first := serveConfig(t, cfgPath)
	first.Env = append(first.Env, "TEST_KEY=sk-test")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "the job to be half way, in a request", func() bool { return fake.Holding() > 0 })
	first.Process.Kill()
	first.Wait()
	chattest.Eventually(t, "the killed process's request to end", func() bool { return fake.Holding() == 0 })
	fake.Release()
	if p := progress(); p.Done != rows/2 || p.Total != rows {
		t.Fatalf("killed half way: %+v", p)
	}
	second := serveConfig(t, cfgPath)
	second.Env = append(second.Env, "TEST_KEY=sk-test")
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { second.Process.Kill(); second.Wait() }()
	// The killed process's lease on the job lapses first.
	chattest.Eventually(t, "the job to finish", func() bool { return progress().Done == rows })
	if n := fake.Texts(); n != rows {
		t.Errorf("%d memories embedded for %d", n, rows)
	}
}
