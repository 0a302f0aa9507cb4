package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"loadout/google/googletest"
	"loadout/google/workspace"
	"loadout/settings"
	"loadout/tools"
)

// The person approves a summary; what runs must not reach anyone or
// anything the summary leaves out. For every Workspace tool that can need
// approval, generated calls go through the executor as the engine runs
// them (checked and decoded once, summarised, held in their stored form,
// then run from that form as after Approve) against a fake Google API
// that records every request. Each email address a changing request
// carries (headers, bodies, a mail's MIME) and each generated value in its
// path or query (the file, event, message or task it acts on) must be in
// the summary, or counted in its "and N others".
func TestEverySummaryNamesWhoAndWhatACallReaches(t *testing.T) {
	api, reg, ctx, cat := workspaceOnFake(t)
	rng := rand.New(rand.NewPCG(24, 2))
	checked := 0
	for _, d := range reg.All(nil) {
		if !confirmable(d) {
			continue
		}
		tool, _ := reg.Tool(d.Name)
		ran, lastErr := 0, ""
		for i := range 40 {
			args, values := generateArgs(rng, d.Name, tool.Parameters)
			// Held: the summary and the stored form, from one decode.
			var summary, stored string
			hold := tools.NewExecutor(reg, quietLog())
			hold.SetGate(func(ctx context.Context, d tools.Definition, _ tools.Call, in tools.Input) (tools.Result, bool, func(tools.Result)) {
				summary, stored = tools.Summary(ctx, d, in), in.JSON
				return tools.Result{Status: tools.StatusPending}, true, nil
			})
			res := hold.Run(ctx, cat, []tools.Call{{ID: "c1", Name: d.Name, Arguments: args}})[0]
			if res.Status != tools.StatusPending {
				lastErr = res.Content
				continue // refused before asking: nothing can run
			}
			// Approved: run from the stored form.
			before := len(api.Requests())
			if res := tools.NewExecutor(reg, quietLog()).Run(ctx, cat, []tools.Call{{ID: "c1", Name: d.Name, Arguments: stored}})[0]; res.Status != tools.StatusSuccess {
				lastErr = res.Content
			} else {
				ran++
			}
			for _, r := range api.Requests()[before:] {
				if r.Method == "GET" {
					continue
				}
				for _, miss := range unnamed(r, values, summary) {
					t.Errorf("%s case %d: %s %s reaches %q, which the summary does not name: %q\narguments: %s", d.Name, i, r.Method, r.Path, miss, summary, args)
				}
			}
		}
		if ran == 0 {
			t.Errorf("%s: no generated call ran; the generator needs a hint for its parameters; last: %s", d.Name, lastErr)
		}
		checked++
	}
	if checked < 30 {
		t.Fatalf("only %d confirmable Workspace tools checked", checked)
	}
}

// workspaceOnFake is every Workspace tool on a fake Google API that
// answers any request with fakeGoogleAnswer and records it, the
// context of a call as a Telegram person, and the catalog with every
// group loaded.
func workspaceOnFake(t *testing.T) (*googletest.API, *tools.Registry, context.Context, *tools.Catalog) {
	api := googletest.NewAPI(t)
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		api.Handle(m+" /*", fakeGoogleAnswer)
	}
	reg := tools.NewRegistry()
	for _, build := range workspace.All(settings.GoogleConfig{}, workspace.Deps{Save: func(_ context.Context, name string, _ []byte) (string, error) { return name, nil }}) {
		g := build.New(api.Client())
		if err := reg.AddGroup(g.Group, g.Tools...); err != nil {
			t.Fatal(err)
		}
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "telegram:42", UserKey: "telegram:42"})
	return api, reg, ctx, reg.Catalog(true, nil, nil)
}

// confirmable reports whether a call of d can need approval: its effect
// in general, or per call, is more than read-only.
func confirmable(d tools.Definition) bool {
	return d.EffectFor != nil || tools.EffectOf(context.Background(), d, nil) > tools.EffectRead
}

// ownAddress is the fake's address of the person acting.
const ownAddress = "me@example.com"

var emailPattern = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)

// unnamed lists what request r reaches that summary does not name: the
// email addresses it carries and the generated values in its path or
// query. Addresses left out are allowed up to the count of "and N
// others" the summary gives.
func unnamed(r googletest.Request, values []string, summary string) []string {
	text := r.Path + "\n" + r.Body
	var body map[string]any
	if json.Unmarshal([]byte(r.Body), &body) == nil {
		if raw, ok := body["raw"].(string); ok { // a mail: who it goes to
			b, err := base64.URLEncoding.DecodeString(raw)
			if err != nil {
				b, _ = base64.RawURLEncoding.DecodeString(raw)
			}
			msg, err := mail.ReadMessage(bytes.NewReader(b))
			if err != nil {
				return []string{"a mail that does not parse"}
			}
			text = r.Path
			for _, h := range []string{"To", "Cc", "Bcc"} {
				text += "\n" + msg.Header.Get(h)
			}
		}
	}
	var missing []string
	for _, a := range emailPattern.FindAllString(text, -1) {
		if a == ownAddress && strings.Contains(r.Path, a) {
			continue // the person's own address, as the setting it changes
		}
		if !strings.Contains(summary, a) && !slices.Contains(missing, a) {
			missing = append(missing, a)
		}
	}
	others := 0
	for _, m := range regexp.MustCompile(`and (\d+) others`).FindAllStringSubmatch(summary, -1) {
		n, _ := strconv.Atoi(m[1])
		others += n
	}
	if len(missing) <= others {
		missing = nil
	}
	where, _ := url.PathUnescape(r.Path)
	where += "?" + r.Query.Encode()
	if q, err := url.QueryUnescape(r.Query.Encode()); err == nil {
		where += "&" + q
	}
	for _, v := range values {
		if strings.Contains(where, v) && !strings.Contains(summary, v) {
			missing = append(missing, v)
		}
	}
	return missing
}

// fakeGoogleAnswer answers any Workspace request with a resource that has
// what the tools read before they change something: a mail with headers,
// a file with parents and sharing, an event with attendees.
func fakeGoogleAnswer(r googletest.Request) (int, string) {
	if r.Method == "DELETE" {
		return 204, ""
	}
	return 200, `{"id":"obj1","name":"Report","title":"Report","summary":"Meeting","threadId":"t1","historyId":"1",
"mimeType":"application/vnd.google-apps.document","parents":["parent0"],"webViewLink":"https://example.com/obj1",
"owners":[{"emailAddress":"owner@example.com"}],
"permissions":[{"id":"perm1","type":"user","role":"writer","emailAddress":"shared@example.com"}],
"payload":{"mimeType":"text/plain","headers":[{"name":"From","value":"Orig <orig@example.com>"},{"name":"To","value":"me@example.com"},{"name":"Subject","value":"Hello"},{"name":"Message-ID","value":"<m1@mail.example.com>"}],"body":{"data":"aGk"}},
"message":{"id":"m1","threadId":"t1","payload":{"mimeType":"text/plain","headers":[{"name":"To","value":"draft@example.com"},{"name":"Subject","value":"Draft"}]}},
"start":{"dateTime":"2026-12-01T10:00:00Z"},"end":{"dateTime":"2026-12-01T11:00:00Z"},
"attendees":[{"email":"attendee@example.com"}],
"spreadsheetId":"obj1","documentId":"obj1","presentationId":"obj1","formId":"obj1",
"sheets":[{"properties":{"sheetId":0,"title":"Sheet1"}}],"resourceName":"people/c1","etag":"e1",
"emailAddress":"me@example.com","labels":[{"id":"STARRED","name":"STARRED","type":"system"},{"id":"Label_1","name":"Work","type":"user"}],"sendAs":[{"sendAsEmail":"me@example.com","isPrimary":true,"isDefault":true}],"displayName":"Me","forwardingEmail":"fwd@example.com","verificationStatus":"accepted"}`
}

// generateArgs makes arguments for a call from the tool's schema, each
// string a fresh value so the test can tell where it went; values lists
// them. Parameter names hint at the kind of value: addresses, times,
// dates.
func generateArgs(rng *rand.Rand, tool string, schema json.RawMessage) (args string, values []string) {
	var s map[string]any
	_ = json.Unmarshal(schema, &s)
	g := &argGen{rng: rng, tool: tool}
	v := g.object(s)
	b, _ := json.Marshal(v)
	return string(b), g.values
}

type argGen struct {
	rng    *rand.Rand
	tool   string
	values []string
}

func (g *argGen) object(s map[string]any) map[string]any {
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	req := map[string]bool{}
	for _, r := range asList(s["required"]) {
		req[r.(string)] = true
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if req[n] || g.rng.IntN(3) > 0 {
			p, _ := props[n].(map[string]any)
			out[n] = g.value(n, p)
		}
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

func (g *argGen) value(name string, s map[string]any) any {
	if enum := asList(s["enum"]); len(enum) > 0 {
		return enum[g.rng.IntN(len(enum))]
	}
	switch s["type"] {
	case "object":
		return g.object(s)
	case "array":
		item, _ := s["items"].(map[string]any)
		n := 1 + g.rng.IntN(5)
		out := make([]any, n)
		for i := range out {
			out[i] = g.value(strings.TrimSuffix(name, "s"), item)
		}
		return out
	case "integer", "number":
		lo, hi := 1, 5
		if m, ok := s["minimum"].(float64); ok {
			lo = int(m)
		}
		if m, ok := s["maximum"].(float64); ok && int(m) < hi {
			hi = int(m)
		}
		return lo + g.rng.IntN(max(1, hi-lo+1))
	case "boolean":
		return g.rng.IntN(2) == 0
	}
	return g.str(name, s)
}

func (g *argGen) str(name string, s map[string]any) string {
	n := strings.ToLower(name)
	desc, _ := s["description"].(string)
	switch {
	case g.tool == "drive_unshare" && n == "email":
		return "shared@example.com" // who the fake's file is shared with
	case n == "add" || n == "remove" || strings.Contains(n, "label"):
		return []string{"Work", "STARRED"}[g.rng.IntN(2)] // labels the fake has
	case strings.HasSuffix(n, "zone"):
		return []string{"Europe/Berlin", "UTC", "America/New_York"}[g.rng.IntN(3)]
	case strings.HasPrefix(g.tool, "calendar_") && (n == "from" || n == "to"):
		return fmt.Sprintf("2026-12-%02dT%02d:00:00Z", 1+g.rng.IntN(13)+(map[string]int{"from": 0, "to": 14})[n], 8+g.rng.IntN(10))
	case strings.Contains(n, "date") && !strings.Contains(n, "time") || strings.HasPrefix(n, "due_") ||
		strings.Contains(desc, "YYYY-MM-DD") && !strings.Contains(desc, "RFC 3339"):
		return fmt.Sprintf("2026-12-%02d", 1+g.rng.IntN(27))
	case n == "start" || n == "end" || n == "due" || strings.Contains(n, "time") || strings.HasSuffix(n, "_at") || strings.Contains(desc, "RFC 3339"):
		return fmt.Sprintf("2026-12-%02dT%02d:00:00Z", 1+g.rng.IntN(27), 8+g.rng.IntN(10))
	case n == "to" || n == "cc" || n == "bcc" || strings.Contains(n, "email") || strings.Contains(n, "attendee") ||
		strings.Contains(n, "address") || strings.Contains(n, "recipient") || strings.HasPrefix(n, "forward") || n == "delegate":
		k := 1
		if s["type"] == "string" && (n == "to" || n == "cc" || n == "bcc" || strings.HasSuffix(n, "s")) {
			k = 1 + g.rng.IntN(6)
		}
		addrs := make([]string, k)
		for i := range addrs {
			addrs[i] = g.token() + "@example.org"
			g.values = append(g.values, addrs[i])
		}
		return strings.Join(addrs, ", ")
	case n == "resource_name":
		v := "people/c" + g.token()
		g.values = append(g.values, v)
		return v
	case n == "url" || strings.HasSuffix(n, "_url"):
		v := "https://" + g.token() + ".example.com/" + g.token() + ".png"
		g.values = append(g.values, v)
		return v
	case n == "domain":
		v := g.token() + ".example.net"
		g.values = append(g.values, v)
		return v
	}
	v := g.token()
	g.values = append(g.values, v)
	return v
}

// token is a fresh value that no answer or fixed text contains.
func (g *argGen) token() string {
	const letters = "bcdfghjkmnpqrstvwxz"
	b := []byte("v")
	for range 7 {
		b = append(b, letters[g.rng.IntN(len(letters))])
	}
	return string(b)
}

// Every tool that can wait for approval has its summary checked by a
// property test: the Workspace tools above, the default summary (tools
// without a Summarize of their own: MCP, manifests, settings, commands)
// in package tools, and each other tool's own summary
// by the test named here. A new confirmable tool with a summary of its
// own fails this test until it gets one.
func TestEveryConfirmableToolHasItsSummaryChecked(t *testing.T) {
	own := map[string]string{
		"http_request":    "tools/web:TestHTTPRequestSummaryNamesWhereItGoes",
		"files":           "tools/files:TestFilesSummaryNamesWhatChanges",
		"custom_tools":    "tools/custom:TestCustomToolChangesAreDestructiveAndSaySo",
		"memory":          "tools/memory:TestMemorySummaryShowsTheTextWhole",
		"scheduled_tasks": "tools/schedule:TestScheduleSummaryShowsThePromptWhole",
	}
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.Exec.Enabled, cfg.Exec.Allow = true, []string{"echo"}
	a, err := newApp(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	inWorkspace := map[string]bool{}
	for _, build := range workspace.All(settings.GoogleConfig{}, workspace.Deps{}) {
		for _, tl := range build.New(workspace.Unconfigured{}).Tools {
			inWorkspace[tl.Name] = true
		}
	}
	n := 0
	for _, d := range a.reg.All(nil) {
		if !confirmable(d) || d.Summarize == nil || inWorkspace[d.Name] {
			continue
		}
		n++
		where, ok := own[d.Name]
		if !ok {
			t.Errorf("%s can wait for approval and has a summary of its own that no property test checks", d.Name)
			continue
		}
		pkg, name, _ := strings.Cut(where, ":")
		if !definesTest(t, filepath.Join("..", "..", pkg), name) {
			t.Errorf("%s: %s has no test %s", d.Name, pkg, name)
		}
	}
	if n < len(own) {
		t.Fatalf("only %d of the %d tools listed were found", n, len(own))
	}
	if !definesTest(t, filepath.Join("..", "..", "tools"), "TestDefaultSummaryHidesNoAddressOrID") {
		t.Fatal("the default summary's property test is gone")
	}
}

// definesTest reports whether a _test.go file in dir declares func name.
func definesTest(t *testing.T, dir, name string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("\nfunc "+name+"(t *testing.T)")) {
			return true
		}
	}
	return false
}
