package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/settings"
	"loadout/tools"
)

// findRequest is one request of testdata/find_requests.tsv: the half it
// belongs to, the tools that do it, and the words.
type findRequest struct {
	half  string
	tools []string
	query string
}

// findRequests reads the request set.
func findRequests(t testing.TB) []findRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "find_requests.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var out []findRequest
	for i, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || (f[0] != "tune" && f[0] != "test") {
			t.Fatalf("find_requests.tsv line %d: %q", i+1, line)
		}
		out = append(out, findRequest{half: f[0], tools: strings.Split(f[1], "|"), query: f[2]})
	}
	return out
}

// fullApp is a deployment with every group: Google, exec, a skill; with
// -find.meaning, find_tools ranks by meaning too, on the fake embeddings
// server (chattest.FakeVector).
func fullApp(t testing.TB) *app {
	t.Helper()
	cfg, _ := settings.Parse(nil, env(map[string]string{"LOADOUT_EXEC_ENABLED": "true", "LOADOUT_EXEC_ALLOW": "python3"}))
	if *findMeaning {
		fake := chattest.NewEmbeddingsServer(t)
		cfg.Embeddings = openai.EmbeddingsConfig{Model: "fake-embed", BaseURL: fake.URL + "/v1", APIKey: "test"}
	}
	cfg.Tools.Admins = []string{"console:local"} // an admin asks: custom_tools is theirs to find
	dir := t.TempDir()
	cfg.Store.Path = filepath.Join(dir, "x.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	os.MkdirAll(cfg.Skills.Dir, 0o700)
	writeSkill(t, cfg.Skills.Dir)
	a, err := buildApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	return a
}

// The request set covers every tool the model can find, in both halves
// at least once overall, and names no tool that does not exist.
func TestFindRequestsCoverEveryTool(t *testing.T) {
	reqs := findRequests(t)
	if len(reqs) < 300 {
		t.Fatalf("%d requests; at least 300 are needed", len(reqs))
	}
	a := fullApp(t)
	named := map[string]int{}
	halves := map[string]int{}
	for _, r := range reqs {
		halves[r.half]++
		for _, tl := range r.tools {
			if _, ok := a.reg.Tool(tl); !ok {
				t.Errorf("%q names %s, which does not exist", r.query, tl)
			}
			named[tl]++
		}
	}
	for _, d := range a.reg.All(nil) {
		switch d.Name {
		case tools.FindToolsName, tools.LoadGroupName, tools.UnloadGroupName:
			continue
		}
		if named[d.Name] < 2 {
			t.Errorf("%s has %d requests", d.Name, named[d.Name])
		}
	}
	if d := halves["tune"] - halves["test"]; d < -1 || d > 1 {
		t.Errorf("halves %v", halves)
	}
}

// findFigures are retrieval figures over some requests.
type findFigures struct {
	at1, at5, mrr float64
	misses        []string
}

// rankFigures runs each request through find_tools as the model calls it.
func rankFigures(a *app, reqs []findRequest) findFigures {
	find, _ := a.reg.Tool(tools.FindToolsName)
	x := tools.NewExecutor(a.reg, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local", UserKey: "console:local"})
	var f findFigures
	for _, r := range reqs {
		q, _ := json.Marshal(map[string]any{"query": r.query, "limit": 20})
		lines := strings.Split(x.Run(ctx, nil, []tools.Call{{ID: "1", Name: find.Name, Arguments: string(q)}})[0].Content, "\n")
		rank := 0
		for i, l := range lines {
			if slices.ContainsFunc(r.tools, func(tl string) bool { return strings.HasPrefix(l, "- "+tl+" (") }) {
				rank = i + 1
				break
			}
		}
		switch {
		case rank == 1:
			f.at1++
			fallthrough
		case rank >= 1 && rank <= 5:
			f.at5++
		}
		if rank > 0 {
			f.mrr += 1 / float64(rank)
		}
		if rank != 1 {
			f.misses = append(f.misses, fmt.Sprintf("%s → %s (rank %d)", r.query, strings.Join(r.tools, "|"), rank))
		}
	}
	n := float64(len(reqs))
	f.at1, f.at5, f.mrr = f.at1/n, f.at5/n, f.mrr/n
	return f
}

// BenchmarkFindTools measures find_tools' retrieval over every tool
// loadout has (Google's included) on testdata/find_requests.tsv, each
// half apart — the test half's figures are the ones that count; the
// tuning half is what descriptions, examples and synonyms were changed
// by — and how long the index and a query take.
//
//	go test -tags sqlite_fts5 -run '^$' -bench FindTools -benchtime 1x ./cmd/loadout/
//
// -find.misses logs the tuning half's misses (never the test half's),
// and those of the set -find.other names.
func BenchmarkFindTools(b *testing.B) {
	a := fullApp(b)
	reqs := findRequests(b)
	find, _ := a.reg.Tool(tools.FindToolsName)
	x := tools.NewExecutor(a.reg, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local", UserKey: "console:local"})
	start := time.Now()
	x.Run(ctx, nil, []tools.Call{{ID: "1", Name: find.Name, Arguments: `{"query":"warm the index"}`}}) // builds it
	index := time.Since(start)
	halves := map[string][]findRequest{}
	for _, r := range reqs {
		halves[r.half] = append(halves[r.half], r)
	}
	var figs map[string]findFigures
	start = time.Now()
	for range b.N {
		figs = map[string]findFigures{}
		for h, rs := range halves {
			figs[h] = rankFigures(a, rs)
		}
	}
	per := time.Since(start) / time.Duration(b.N*len(reqs))
	for _, h := range []string{"test", "tune"} {
		f := figs[h]
		b.ReportMetric(f.at1, h+"-recall@1")
		b.ReportMetric(f.at5, h+"-recall@5")
		b.ReportMetric(f.mrr, h+"-MRR")
	}
	b.ReportMetric(float64(index.Microseconds())/1000, "index-ms")
	b.ReportMetric(float64(per.Microseconds()), "µs/query")
	if *findMisses {
		b.Logf("tuning half, not first: %s", strings.Join(figs["tune"].misses, "; "))
	}
	for _, q := range strings.Split(*findQuery, ";") {
		if q == "" {
			continue
		}
		in, _ := json.Marshal(map[string]any{"query": q, "limit": 6})
		fmt.Fprintf(os.Stderr, "%s:\n%s\n", q, x.Run(ctx, nil, []tools.Call{{ID: "1", Name: find.Name, Arguments: string(in)}})[0].Content)
	}
	if *findOther != "" {
		other := otherRequests(b, *findOther)
		for _, r := range other {
			for _, tl := range r.tools {
				if _, ok := a.reg.Tool(tl); !ok {
					b.Fatalf("%s: %q names %s, which is no tool here", *findOther, r.query, tl)
				}
			}
		}
		f := rankFigures(a, other)
		b.ReportMetric(f.at1, "other-recall@1")
		b.ReportMetric(f.at5, "other-recall@5")
		b.ReportMetric(f.mrr, "other-MRR")
		if *findMisses {
			fmt.Fprintf(os.Stderr, "%s, not first:\n%s\n", *findOther, strings.Join(f.misses, "\n"))
		}
	}
}

var (
	findMisses  = flag.Bool("find.misses", false, "BenchmarkFindTools: log the tuning half's misses")
	findQuery   = flag.String("find.query", "", "BenchmarkFindTools: log the tools found for these requests (;-separated)")
	findMeaning = flag.Bool("find.meaning", false, "BenchmarkFindTools: rank by meaning too, with the fake embeddings server")
	findOther   = flag.String("find.other", "", "BenchmarkFindTools: also report the figures of a set of requests kept elsewhere (lines: tool[|tool]<TAB>request)")
)

// otherRequests reads a request set kept outside the project: one
// request a line, after its tool(s) and a tab.
func otherRequests(t testing.TB, path string) []findRequest {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []findRequest
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tl, q, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s line %d: want tool<TAB>request, got %q", path, i+1, line)
		}
		out = append(out, findRequest{half: "other", tools: strings.Split(tl, "|"), query: q})
	}
	return out
}

// A tool made in a chat (or served by an MCP server) whose description
// is stuffed with every task's words, so that find_tools offers it in
// place of the tool asked for, wins almost no request: each word counts
// once however often it is repeated (BM25's saturation), a long
// description weighs less per word, and such tools declare no example
// requests.
func TestAToolStuffedWithEveryWordIsNotOfferedFirst(t *testing.T) {
	a := fullApp(t)
	words := "send email mail message reply answer calendar event meeting schedule contact phone number drive file folder " +
		"share doc sheet slide form task todo remind search find read list delete remove create add update change pdf web"
	reqs := findRequests(t)
	for _, repeat := range []int{1, 40} {
		a.reg.ReplaceGroup(tools.Group{Name: "stuffed", Description: words},
			tools.New(tools.Definition{Name: "stuffed_tool", Description: strings.Repeat(words+" ", repeat)},
				func(ctx context.Context, in struct{}) (any, error) { return nil, nil }))
		find, _ := a.reg.Tool(tools.FindToolsName)
		x := tools.NewExecutor(a.reg, nil)
		ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local", UserKey: "console:local"})
		first := 0
		for _, r := range reqs {
			q, _ := json.Marshal(map[string]any{"query": r.query})
			if strings.HasPrefix(x.Run(ctx, nil, []tools.Call{{ID: "1", Name: find.Name, Arguments: string(q)}})[0].Content, "- stuffed_tool ") {
				first++
			}
		}
		if first*100 > len(reqs) {
			t.Errorf("repeated %d times: the stuffed tool is offered first for %d of %d requests", repeat, first, len(reqs))
		}
	}
}

// find_tools with load loads the groups of what it found, recorded so a
// restart restores them, like load_tool_group.
func TestFindToolsLoadsGroups(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "")
	model.Call("find_tools", `{"query":"read a pdf's text","load":true}`)
	model.Text("Ready.")
	if out, err := runCLI(t, "can you read pdfs?\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Ready.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(model); !strings.Contains(got, "- pdf_text (pdf):") || !strings.Contains(got, "Loaded groups: ") || !strings.Contains(got, "pdf.") {
		t.Fatalf("find_tools gave %s", got)
	}
	model.Text("Still loaded.")
	if _, err := runCLI(t, "and now?\n", "-config", cfgPath, "chat"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(chattest.ToolNames(model.Last(t)), " "); !strings.Contains(got, "pdf_text") {
		t.Errorf("after a restart the request offered %s", got)
	}
}

// Found by probing: with load, find_tools loaded the group of every one
// of its five results (a PDF request loaded Google Drive too). Only the
// groups of results close to the best are loaded, and the result says
// which were left.
func TestFindToolsLoadsOnlyConfidentGroups(t *testing.T) {
	a := fullApp(t)
	find, _ := a.reg.Tool(tools.FindToolsName)
	x := tools.NewExecutor(a.reg, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local", UserKey: "console:local"})
	r := x.Run(ctx, nil, []tools.Call{{ID: "1", Name: find.Name, Arguments: `{"query":"extract the text from this pdf file","load":true}`}})[0]
	if !slices.Equal(r.Groups, tools.LoadChanges("pdf")) {
		t.Fatalf("loaded %v:\n%s", r.Groups, r.Content)
	}
	if !strings.Contains(r.Content, "Loaded groups: pdf.") {
		t.Errorf("the result does not say what was loaded:\n%s", r.Content)
	}
}

// The first turn stays lean in a full deployment — Google, exec on, a
// skill, an admin: the core schemas and the group listing, as `loadout
// tools` counts them, fit in 800 tokens, with every core tool there.
// (It was 700 until delegate became core: its schema is 82 tokens,
// measured by this test's log, which the first turn pays for a tool every
// turn may call; agent.max_delegation_depth: -1 takes it off.)
func TestFirstTurnFitsIn800Tokens(t *testing.T) {
	cfg, _ := settings.Parse(nil, env(map[string]string{"LOADOUT_EXEC_ENABLED": "true", "LOADOUT_EXEC_ALLOW": "python3"}))
	dir := t.TempDir()
	cfg.Store.Path = filepath.Join(dir, "x.db")
	cfg.Tools.Admins = []string{"telegram:1"}
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	os.MkdirAll(cfg.Skills.Dir, 0o700)
	writeSkill(t, cfg.Skills.Dir)
	cfg.Google = settings.GoogleConfig{ClientID: "id.apps.googleusercontent.com", ClientSecret: "s", RedirectURL: "https://x.example/oauth/google/callback",
		TokenKey: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}
	a, err := buildApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	r := tools.Report(a.reg, a.tokens.Count)
	t.Logf("the first turn: %d tokens (core %d + listing %d)", r.GroupsTotal, r.CoreTokens, r.Listing)
	if r.GroupsTotal > 800 {
		t.Errorf("the first turn costs %d tokens (core %d + listing %d)", r.GroupsTotal, r.CoreTokens, r.Listing)
	}
	for _, core := range []string{"load_tool_group", "unload_tool_group", "find_tools", "get_current_time", "delegate", "memory", "load_skill", "web"} {
		if !slices.Contains(r.CoreTools, core) {
			t.Errorf("%s is not core: %v", core, r.CoreTools)
		}
	}
}
