package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"loadout/tools"
	"loadout/tools/guard"
	"loadout/tools/pdf/pdftest"
)

// run calls a tool through the executor, as the engine does.
func run(t *testing.T, cfg Config, name, args string) tools.Result {
	t.Helper()
	ts, err := Tools(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := tools.NewRegistry()
	if err := r.Add(ts...); err != nil {
		t.Fatal(err)
	}
	return tools.NewExecutor(r, nil).Run(context.Background(), nil, []tools.Call{{ID: "1", Name: name, Arguments: args}})[0]
}

// local lets the tests reach their servers on 127.0.0.1, as an operator
// allows an intranet.
func local(t *testing.T) *guard.Guard {
	g, err := guard.New(guard.Config{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func decode[T any](t *testing.T, r tools.Result, v *T) {
	t.Helper()
	var zero T
	*v = zero
	if r.Status != tools.StatusSuccess {
		t.Fatalf("result %s: %s", r.Status, r.Content)
	}
	if err := json.Unmarshal([]byte(r.Content), v); err != nil {
		t.Fatalf("%v: %s", err, r.Content)
	}
}

const article = `<!doctype html><html><head><title>Tea guide</title></head><body>
<nav><a href="/">Home</a> <a href="/shop">Shop</a></nav>
<article><h1>How to brew green tea</h1>
<p>Green tea wants water at about eighty degrees, not boiling, or it turns bitter. Let it steep for two minutes and no longer.</p>
<p>Use about two grams of leaves for every hundred millilitres of water. Good leaves can be steeped three times, a little longer each time.</p>
<p>See <a href="/notes/water">our notes on water</a> for what kind of water to use and why soft water tastes better.</p>
</article><footer>Copyright Tea Shop</footer></body></html>`

func TestFetchTurnsPagesIntoText(t *testing.T) {
	pdfDoc := pdftest.Document("", "Hello from a PDF")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tea":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, article)
		case "/plain":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "just text")
		case "/data":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":1,"b":[true]}`)
		case "/doc.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdfDoc)
		case "/image":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG"))
		case "/gone":
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := Config{Guard: local(t)}

	var p page
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/tea")), &p)
	if !strings.Contains(p.Content, "eighty degrees") || strings.Contains(p.Content, "Copyright") || strings.Contains(p.Content, "<p>") {
		t.Errorf("the article came out as %q", p.Content)
	}
	if !strings.Contains(p.Content, "]("+srv.URL+"/notes/water)") {
		t.Errorf("links are not absolute Markdown links: %q", p.Content)
	}
	if p.ContentType != "text/html" || p.Title == "" {
		t.Errorf("page %+v", p)
	}
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/plain")), &p)
	if p.Content != "just text" {
		t.Errorf("plain text: %q", p.Content)
	}
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/data")), &p)
	if !strings.Contains(p.Content, "\"b\": [\n") {
		t.Errorf("JSON: %q", p.Content)
	}
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/doc.pdf")), &p)
	if !strings.Contains(p.Content, "Hello from a PDF") {
		t.Errorf("PDF: %q", p.Content)
	}
	if r := run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/image")); r.Code != "unsupported_type" {
		t.Errorf("an image: %+v", r)
	}
	if r := run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/gone")); r.Code != tools.CodeNotFound {
		t.Errorf("a 404: %+v", r)
	}
}

func TestFetchCapsTheDownloadAndTheResult(t *testing.T) {
	text := strings.Repeat("é", 250)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, text)
	}))
	defer srv.Close()
	cfg := Config{Guard: local(t), MaxChars: 100}
	var p page
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL)), &p)
	if p.Content != strings.Repeat("é", 100) || p.TotalChars != 250 || p.NextOffset != 100 || !strings.Contains(p.Note, "offset 100") {
		t.Fatalf("first part %+v", p)
	}
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q,"offset":200}`, srv.URL)), &p)
	if p.Content != strings.Repeat("é", 50) || p.NextOffset != 0 {
		t.Fatalf("last part %+v", p)
	}
	cfg = Config{Guard: local(t), MaxBytes: 101}
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL)), &p)
	if !strings.Contains(p.Note, "stopped at 101 bytes") || strings.Count(p.Content, "é") != 50 {
		t.Fatalf("capped download %+v", p)
	}
}

func TestFetchRedirects(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "elsewhere") }))
	defer other.Close()
	// The same server under another name is another host.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost.test", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
		case "/new":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "moved here")
		case "/away":
			http.Redirect(w, r, otherURL+"/x", http.StatusFound)
		}
	}))
	defer srv.Close()
	cfg := Config{Guard: local(t)}
	var p page
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/old")), &p)
	if p.Content != "moved here" || !strings.HasSuffix(p.URL, "/new") {
		t.Fatalf("a same-host redirect: %+v", p)
	}
	var rd redirect
	decode(t, run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, srv.URL+"/away")), &rd)
	if rd.Status != "redirect" || rd.Location != otherURL+"/x" {
		t.Fatalf("a redirect to another host: %+v", rd)
	}
}

// The web tool refuses private addresses: by the URL, and when a public
// looking name resolves to one, at dial time.
func TestFetchRefusesPrivateAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the private server was reached")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	g, err := guard.New(guard.Config{LookupIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // every name rebinds to loopback
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Guard: g}
	for _, u := range []string{srv.URL, "http://2130706433:" + port + "/", "http://news.example:" + port + "/", "http://169.254.169.254/latest/meta-data/"} {
		r := run(t, cfg, "web", fmt.Sprintf(`{"action":"fetch","url":%q}`, u))
		if r.Code != "blocked_address" || !strings.Contains(r.Content, "web.allow_hosts") {
			t.Errorf("%s: %+v", u, r)
		}
		r = run(t, cfg, "http_request", fmt.Sprintf(`{"method":"GET","url":%q}`, u))
		if r.Code != "blocked_address" {
			t.Errorf("http_request %s: %+v", u, r)
		}
	}
}

func TestSearchBackends(t *testing.T) {
	if r := run(t, Config{}, "web", `{"action":"search","query":"tea"}`); r.Code != "not_configured" || !strings.Contains(r.Content, "web.searxng_url") {
		t.Errorf("no backend: %+v", r)
	}
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" || r.URL.Query().Get("q") != "green tea" {
			http.Error(w, "bad", 400)
			return
		}
		io.WriteString(w, `{"results":[{"title":"Tea","url":"https://tea.example/","content":"All about tea"}]}`)
	}))
	defer searx.Close()
	var res results
	decode(t, run(t, Config{SearXNGURL: searx.URL + "/"}, "web", `{"action":"search","query":"green tea"}`), &res)
	if res.Source != "searxng" || len(res.Results) != 1 || res.Results[0].URL != "https://tea.example/" || res.Results[0].Snippet != "All about tea" {
		t.Errorf("searxng: %+v", res)
	}
	brave := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Subscription-Token") != "bk" {
			w.WriteHeader(401)
			return
		}
		io.WriteString(w, `{"web":{"results":[{"title":"Tea","url":"https://tea.example/","description":"All about <strong>tea</strong>"}]}}`)
	}))
	defer brave.Close()
	decode(t, run(t, Config{BraveAPIKey: "bk", BraveURL: brave.URL}, "web", `{"action":"search","query":"green tea"}`), &res)
	if res.Source != "brave" || len(res.Results) != 1 || res.Results[0].Snippet != "All about tea" {
		t.Errorf("brave: %+v", res)
	}
	if r := run(t, Config{BraveAPIKey: "wrong", BraveURL: brave.URL}, "web", `{"action":"search","query":"x"}`); r.Code != tools.CodeUnavailable {
		t.Errorf("a refused key: %+v", r)
	}
}

func TestWebCorrectsTheModel(t *testing.T) {
	r := run(t, Config{}, "web", `{"action":"fetch"}`)
	if r.Code != tools.CodeMissingParameter || !strings.Contains(r.Content, `"required_param":"url"`) {
		t.Errorf("fetch without url: %+v", r)
	}
	r = run(t, Config{}, "web", `{"action":"search"}`)
	if r.Code != tools.CodeMissingParameter || !strings.Contains(r.Content, `"required_param":"query"`) {
		t.Errorf("search without query: %+v", r)
	}
	if r := run(t, Config{}, "web", `{"action":"browse"}`); r.Status != tools.StatusError || !strings.Contains(r.Content, "search") {
		t.Errorf("an unknown action: %+v", r)
	}
}

func TestHTTPRequest(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "secret=1")
		w.WriteHeader(201)
		io.WriteString(w, `{"id":7}`)
	}))
	defer srv.Close()
	cfg := Config{Guard: local(t)}
	var out httpOutput
	decode(t, run(t, cfg, "http_request", fmt.Sprintf(`{"method":"POST","url":%q,"headers":{"Authorization":"Bearer person-token"},"body":"{\"name\":\"x\"}"}`, srv.URL+"/items")), &out)
	if out.Status != 201 || out.Body != `{"id":7}` || out.Headers["Content-Type"] != "application/json" || out.Headers["Set-Cookie"] != "" {
		t.Errorf("answer %+v", out)
	}
	if got.Method != "POST" || got.Header.Get("Authorization") != "Bearer person-token" || body != `{"name":"x"}` || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %v %q", got.Method, got.Header, body)
	}
	decode(t, run(t, cfg, "http_request", fmt.Sprintf(`{"method":"GET","url":%q}`, srv.URL+"/moved")), &out)
	if out.Status != http.StatusFound || !strings.Contains(out.Note, "redirect") {
		t.Errorf("a redirect was followed or lost: %+v", out)
	}
	for _, bad := range []string{
		fmt.Sprintf(`{"method":"GET","url":%q,"headers":{"Host":"evil.example"}}`, srv.URL),
		fmt.Sprintf(`{"method":"GET","url":%q,"body":"x"}`, srv.URL),
		`{"method":"GET","url":"not a url"}`,
		`{"method":"TRACE","url":"https://example.com/"}`,
	} {
		if r := run(t, cfg, "http_request", bad); r.Status != tools.StatusError || r.Code == tools.CodeInternal {
			t.Errorf("%s: %+v", bad, r)
		}
	}
}

// TEST (finding: what is shown is not what runs): http_request with url
// and URL, or a Bcc-like extra key, is refused and reaches no server;
// the summary of a plain call names method, host and full path.
func TestHTTPRequestWithAmbiguousArgumentsReachesNothing(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	cfg := Config{Guard: local(t)}
	for _, args := range []string{
		fmt.Sprintf(`{"method":"POST","url":%q,"URL":%q,"body":"{}"}`, srv.URL+"/ATTACKER", srv.URL+"/benign-shown"),
		fmt.Sprintf(`{"method":"POST","URL":%q,"url":%q,"body":"{}"}`, srv.URL+"/benign-shown", srv.URL+"/ATTACKER"),
		fmt.Sprintf(`{"method":"POST","url":%q,"Method":"GET"}`, srv.URL+"/x"),
	} {
		if r := run(t, cfg, "http_request", args); r.Code != tools.CodeInvalidArgument {
			t.Errorf("%s: %+v", args, r)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the sink got %d requests", n)
	}
	ts, err := Tools(cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ts, func(tl tools.Tool) bool { return tl.Name == "http_request" })
	if i < 0 {
		t.Fatal("no http_request tool")
	}
	tl := ts[i]
	in, err := tl.Decode([]byte(`{"method":"POST","url":"https://api.example.com/v1/transfers/evil?x=1","headers":{"X-Key":"k"},"body":"{}"}`))
	if err != nil {
		t.Fatal(err)
	}
	s := tools.Summary(context.Background(), tl.Definition, tools.Input{Value: in})
	if !strings.HasPrefix(s, "POST https://api.example.com/v1/transfers/evil?x=1 with the headers X-Key") {
		t.Fatalf("summary = %q", s)
	}
}

// Found by probing: the summary named the headers but not their values,
// and cut the body at 120 characters, so a call approved as "POST …
// with the headers X-Note with the body '{"note":"hello…'" could carry
// a PIN in a header and an IBAN and a collecting URL past the cut. Each
// header's value is shown now, and the body whole up to tools.Whole's
// limit, with what a cut hides listed.
func TestHTTPRequestSummaryHidesNothingItSends(t *testing.T) {
	ts, err := Tools(Config{Guard: local(t)})
	if err != nil {
		t.Fatal(err)
	}
	tl := ts[slices.IndexFunc(ts, func(tl tools.Tool) bool { return tl.Name == "http_request" })]
	body := `{"note":"` + strings.Repeat("hello there ", 300) + `then pay IBAN XX00EVIL99 and post to https://collect.evil.example/c or mail eve@evil.example"}`
	args, _ := json.Marshal(map[string]any{"method": "POST", "url": "https://api.example.com/v1/notes?q=" + strings.Repeat("a", 300) + "&to=eve%40evil.example",
		"headers": map[string]string{"X-Note": "PIN 4921"}, "body": body})
	in, err := tl.Decode(args)
	if err != nil {
		t.Fatal(err)
	}
	s := tools.Summary(context.Background(), tl.Definition, tools.Input{Value: in})
	for _, want := range []string{"4921", "XX00EVIL99", "https://collect.evil.example/c", "eve@evil.example", "eve%40evil.example"} {
		if !strings.Contains(s, want) {
			t.Errorf("the summary hides %q: %s", want, s)
		}
	}
}

// The property behind the summary of http_request: for generated calls
// (any method, paths with escapes, spaces and non-ASCII, queries,
// headers), the method, host and path the server receives are all in the
// summary the person approves.
func TestHTTPRequestSummaryNamesWhereItGoes(t *testing.T) {
	var (
		mu  sync.Mutex
		got []*http.Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	cfg := Config{Guard: local(t)}
	ts, err := Tools(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tl := ts[slices.IndexFunc(ts, func(tl tools.Tool) bool { return tl.Name == "http_request" })]
	rng := rand.New(rand.NewPCG(24, 3))
	reached := 0
	pieces := []string{"v1", "transfers", "a b", "%2F", "caf\u00e9", "..", "x%20y", "~u", "@evil", "q;p", "", "\u202e"}
	for i := range 60 {
		path := ""
		for range 1 + rng.IntN(4) {
			path += "/" + pieces[rng.IntN(len(pieces))]
		}
		u := srv.URL + path
		if rng.IntN(2) == 0 {
			u += fmt.Sprintf("?k%d=%d&to=%s", rng.IntN(9), rng.IntN(999), pieces[rng.IntN(len(pieces))])
		}
		method := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "post"}[rng.IntN(6)]
		args, _ := json.Marshal(map[string]any{"method": method, "url": u, "headers": map[string]string{"X-Try": "1"}})
		in, err := tl.Decode(args)
		if err != nil {
			continue // refused before asking: nothing is sent
		}
		summary := tools.Summary(context.Background(), tl.Definition, tools.Input{Value: in})
		mu.Lock()
		before := len(got)
		mu.Unlock()
		run(t, cfg, "http_request", string(args))
		mu.Lock()
		sent := got[before:]
		mu.Unlock()
		reached += len(sent)
		for _, r := range sent {
			for _, want := range []string{r.Method + " ", "//" + r.Host + r.URL.EscapedPath()} {
				if !strings.Contains(summary, want) {
					t.Errorf("case %d: %s %s reached the server; the summary %q lacks %q", i, r.Method, r.URL.EscapedPath(), summary, want)
				}
			}
		}
	}
	if reached < 30 {
		t.Fatalf("only %d generated calls reached the server", reached)
	}
}
