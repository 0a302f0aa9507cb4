package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loadout/config"
	"loadout/proc"
	"loadout/proc/proctest"
	"loadout/tools"
	"loadout/tools/guard"
)

func TestMain(m *testing.M) {
	proc.Serve()
	if dir := os.Getenv("LOADOUT_TEST_BROWSER_PARENT"); dir != "" {
		os.Exit(keepABrowser(dir))
	}
	os.Exit(m.Run())
}

// site is a server the test serves pages from, on 127.0.0.1, counting
// the requests that reach it.
type site struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	got  []string
}

func serve(t testing.TB, h http.Handler) *site {
	t.Helper()
	s := &site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.got = append(s.got, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

func (s *site) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// names maps the test's host names to 127.0.0.1: good.test is allowed
// (web.allow_hosts), evil.test is not; rebind.test answers an allowed
// public-looking address first and loopback after, as a rebinding DNS
// server does.
type names struct{ rebinds atomic.Int64 }

func (n *names) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	switch host {
	case "good.test", "evil.test", "localhost":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case "rebind.test":
		if n.rebinds.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// manager starts a manager over chromium, skipping only when chromium is
// not installed (CI installs it).
func manager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	if Find() == "" {
		t.Skip("no chromium on this machine: apt-get install chromium (CI installs it)")
	}
	n := &names{}
	g, err := guard.New(guard.Config{AllowHosts: []string{"good.test", "localhost"}, LookupIP: n.lookup})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = reachable(t)
	cfg.Enabled = true
	m, err := New(cfg, Deps{Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// call runs the browser tool for chat as the executor would, without
// its gate.
func call(t testing.TB, m *Manager, chat string, args any) (string, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(tools.WithCaller(context.Background(), tools.Caller{ChatKey: chat}), 90*time.Second)
	defer cancel()
	out, err := m.Tool().Call(ctx, b)
	if err != nil {
		return "", err
	}
	switch v := out.(type) {
	case string:
		return v, nil
	case tools.Media:
		return v.Text, nil
	}
	return fmt.Sprint(out), nil
}

func html(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, body)
	})
}

// A page drawn by script reads as a person sees it, with its elements
// numbered.
func TestScriptRenderedPage(t *testing.T) {
	good := serve(t, html(`<!doctype html><title>Dash</title><body><div id=app></div>
<script>setTimeout(() => { document.getElementById('app').innerHTML =
 '<h1>Revenue 42</h1><a href="/more">More figures</a><label>Email <input name=email></label><button>Go</button>'; }, 100)</script>`))
	m := manager(t, Config{})
	out, err := call(t, m, "test:1", map[string]any{"action": "open", "url": "http://good.test:" + good.port() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Title: Dash", "Revenue 42", `[1] link "More figures"`, `field "Email" name=email`, `button "Go"`} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
}

// reachable is a temporary folder the user chromium runs as (nobody,
// when the tests run as root) can reach: t.TempDir and its parent are
// loadout's alone.
func reachable(t testing.TB) string {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// waitFor polls cond until it holds or a while passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// effectOf and summaryOf are what the executor's gate reads of a call.
func effectOf(t *testing.T, m *Manager, chat string, args map[string]any) (tools.Effect, string) {
	t.Helper()
	b, _ := json.Marshal(args)
	tl := m.Tool()
	in, err := tl.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: chat})
	return tools.EffectOf(ctx, tl.Definition, in), tl.Summarize(ctx, in)
}

// ref finds the number the page gave the element described.
func ref(t *testing.T, page, element string) int {
	t.Helper()
	for _, line := range strings.Split(page, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "[%d]", &n); err == nil && strings.Contains(line, element) {
			return n
		}
	}
	t.Fatalf("no element %q on the page:\n%s", element, page)
	return 0
}

// A form: typing is read-only, its submit button is mutating and the
// question names the host and the fields and values sent; a payment
// form's is destructive, and is not sent unless the call was approved.
func TestFormSubmitIsMutatingAndPaymentAsks(t *testing.T) {
	var mu sync.Mutex
	var posted []string
	good := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/order", "/pay":
			r.ParseForm()
			mu.Lock()
			posted = append(posted, r.URL.Path+" "+r.PostForm.Encode())
			mu.Unlock()
			html(`<title>Done</title><p>Thanks `+r.PostForm.Get("name")+`</p>`).ServeHTTP(w, r)
		case "/checkout":
			html(`<title>Pay</title><form method=post action=/pay><label>Card number <input name=card autocomplete=cc-number></label>
<label>Name <input name=name></label><button>Pay now</button></form>`).ServeHTTP(w, r)
		default:
			html(`<title>Order</title><form method=post action=/order><label>Name <input name=name></label>
<label>Size <select name=size><option>S</option><option>M</option></select></label><input type=hidden name=ref value=abc><button>Send order</button></form>`).ServeHTTP(w, r)
		}
	}))
	m := manager(t, Config{})
	const chat = "test:form"
	base := "http://good.test:" + good.port()
	page, err := call(t, m, chat, map[string]any{"action": "open", "url": base + "/"})
	if err != nil {
		t.Fatal(err)
	}
	name, size, send := ref(t, page, `"Name"`), ref(t, page, `list "Size"`), ref(t, page, `"Send order"`)
	if e, _ := effectOf(t, m, chat, map[string]any{"action": "type", "ref": name, "text": "Ana"}); e != tools.EffectRead {
		t.Errorf("typing is %v", e)
	}
	if _, err := call(t, m, chat, map[string]any{"action": "type", "ref": name, "text": "Ana"}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, m, chat, map[string]any{"action": "select", "ref": size, "option": "M"}); err != nil {
		t.Fatal(err)
	}
	e, sum := effectOf(t, m, chat, map[string]any{"action": "click", "ref": send})
	if e != tools.EffectMutate || !strings.Contains(sum, "good.test") || !strings.Contains(sum, `name="Ana"`) || !strings.Contains(sum, `size="M"`) || !strings.Contains(sum, `ref="abc"`) {
		t.Errorf("the submit button: %v, %q", e, sum)
	}
	if e, sum := effectOf(t, m, chat, map[string]any{"action": "type", "ref": name, "text": "Bo", "submit": true}); e != tools.EffectMutate || !strings.Contains(sum, `name="Bo"`) {
		t.Errorf("typing with Enter: %v, %q", e, sum)
	}
	out, err := call(t, m, chat, map[string]any{"action": "click", "ref": send})
	if err != nil || !strings.Contains(out, "Thanks Ana") {
		t.Fatalf("submitting: %v\n%s", err, out)
	}

	page, err = call(t, m, chat, map[string]any{"action": "open", "url": base + "/checkout"})
	if err != nil {
		t.Fatal(err)
	}
	card, pay := ref(t, page, `"Card number"`), ref(t, page, `"Pay now"`)
	// Typing a card number gives it to the page's script: it asks too.
	e, sum = effectOf(t, m, chat, map[string]any{"action": "type", "ref": card, "text": "4242424242424242"})
	if e != tools.EffectDestructive || !strings.Contains(sum, "PAYMENT") || strings.Contains(sum, "42424242") || !strings.Contains(sum, "•••• 4242") {
		t.Errorf("typing a card number: %v, %q", e, sum)
	}
	if _, err := call(t, m, chat, map[string]any{"action": "type", "ref": card, "text": "4242424242424242"}); err == nil {
		t.Error("a card number was typed unapproved")
	}
	b, _ := json.Marshal(map[string]any{"action": "type", "ref": card, "text": "4242424242424242"})
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: chat, Approved: "call-0"})
	if _, err := m.Tool().Call(ctx, b); err != nil {
		t.Fatal(err)
	}
	e, sum = effectOf(t, m, chat, map[string]any{"action": "click", "ref": pay})
	if e != tools.EffectDestructive || !strings.Contains(sum, "PAYMENT") || strings.Contains(sum, "4242424242424242") || !strings.Contains(sum, "4242") {
		t.Errorf("the pay button: %v, %q", e, sum)
	}
	if _, err := call(t, m, chat, map[string]any{"action": "click", "ref": pay}); err == nil || !strings.Contains(err.Error(), "payment") {
		t.Errorf("an unapproved payment: %v", err)
	}
	mu.Lock()
	if len(posted) != 1 || posted[0] != "/order name=Ana&ref=abc&size=M" {
		t.Errorf("posted: %q", posted)
	}
	mu.Unlock()
	// The call the person approved is sent.
	b, _ = json.Marshal(map[string]any{"action": "click", "ref": pay})
	ctx = tools.WithCaller(context.Background(), tools.Caller{ChatKey: chat, Approved: "call-1"})
	if out, err := m.Tool().Call(ctx, b); err != nil || !strings.Contains(fmt.Sprint(out), "Thanks") {
		t.Errorf("the approved payment: %v %v", err, out)
	}
	mu.Lock()
	if len(posted) != 2 || posted[1] != "/pay card=4242424242424242&name=" {
		t.Errorf("posted: %q", posted)
	}
	mu.Unlock()
}

// /clear and close end the chat's browser: its processes are gone and
// its profile deleted; idle expiry does the same.
func TestProfileDeletedAtClearCloseAndIdle(t *testing.T) {
	good := serve(t, html(`<p>hello</p>`))
	m := manager(t, Config{Idle: time.Second})
	url := "http://good.test:" + good.port() + "/"
	for _, end := range []string{"clear", "close", "idle"} {
		chat := "test:" + end
		if _, err := call(t, m, chat, map[string]any{"action": "open", "url": url}); err != nil {
			t.Fatal(err)
		}
		dir := m.Profile(chat)
		if _, err := os.Stat(filepath.Join(dir, "Default")); err != nil || proctest.Running(dir) == 0 {
			t.Fatalf("%s: no profile or browser running: %v", end, err)
		}
		switch end {
		case "clear":
			m.Clear(context.Background(), chat)
		case "close":
			if out, err := call(t, m, chat, map[string]any{"action": "close"}); err != nil || !strings.Contains(out, "Closed") {
				t.Fatalf("close: %v %s", err, out)
			}
		case "idle":
			waitFor(t, "the idle browser to end", func() bool { return m.Profile(chat) == "" })
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: the profile is still there: %v", end, err)
		}
		if n := proctest.Left(dir, 10*time.Second); n != 0 {
			t.Errorf("%s: %d of chromium's processes outlived it", end, n)
		}
	}
	if _, err := call(t, m, "test:clear", map[string]any{"action": "click", "ref": 1}); err == nil || !strings.Contains(err.Error(), "no page") {
		t.Errorf("a click after clear: %v", err)
	}
}

// Without chromium, the group is listed saying what to install, and
// loading it says so; off, it is not registered at all.
func TestWithoutChromiumTheGroupSaysWhatToInstall(t *testing.T) {
	reg := tools.NewRegistry()
	if err := reg.Add(tools.LoadGroup(reg)); err != nil {
		t.Fatal(err)
	}
	m, err := Register(reg, Config{}, Deps{})
	if m != nil || err != nil || strings.Contains(reg.Listing(nil), "browser") {
		t.Fatalf("off: %v %v\n%s", m, err, reg.Listing(nil))
	}
	if _, err := Register(reg, Config{Enabled: true, Path: filepath.Join(t.TempDir(), "no-chromium")}, Deps{}); err != nil {
		t.Fatal(err)
	}
	if l := reg.Listing(nil); !strings.Contains(l, "apt-get install chromium") {
		t.Errorf("the listing: %s", l)
	}
	load, _ := reg.Tool("load_tool_group")
	out, err := load.Call(context.Background(), json.RawMessage(`{"group_name":"browser"}`))
	if !strings.Contains(fmt.Sprint(out, err), "apt-get install chromium") {
		t.Errorf("the load: %v %v", out, err)
	}
}

// A screenshot is a PNG kept in the chat's files and given to a model
// that reads images.
func TestScreenshotIsSavedAndShown(t *testing.T) {
	good := serve(t, html(`<body style="background:#c00"><h1>Red</h1>`))
	m := manager(t, Config{})
	var saved []byte
	var savedFor string
	m.deps.Save = func(ctx context.Context, name string, data []byte) (string, error) {
		saved, savedFor = data, tools.CallerFrom(ctx).ChatKey
		return name, nil
	}
	if _, err := call(t, m, "test:shot", map[string]any{"action": "open", "url": "http://good.test:" + good.port() + "/"}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"action": "screenshot"})
	out, err := m.Tool().Call(tools.WithCaller(context.Background(), tools.Caller{ChatKey: "test:shot"}), b)
	if err != nil {
		t.Fatal(err)
	}
	media, ok := out.(tools.Media)
	if !ok || len(media.Images) != 1 || media.Images[0].MIME != "image/png" || !strings.Contains(media.Text, "screenshot-good.test-") {
		t.Fatalf("got %#v", out)
	}
	if !bytes.HasPrefix(saved, []byte("\x89PNG")) || !bytes.Equal(saved, media.Images[0].Data) || savedFor != "test:shot" {
		t.Errorf("saved %d bytes for %q", len(saved), savedFor)
	}
}

// As root, a browser.dir that nobody cannot pass through is an error
// naming the key and the fix, not chromium's own failure.
func TestUnreachableDirIsNamed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chromium runs as loadout's own user when it is not root")
	}
	if Find() == "" {
		t.Skip("no chromium on this machine: apt-get install chromium (CI installs it)")
	}
	m, err := New(Config{Dir: t.TempDir()}, Deps{}) // 0700, root's
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = call(t, m, "test:dir", map[string]any{"action": "open", "url": "http://example.com/"})
	if err == nil || !strings.Contains(err.Error(), "browser.dir") || !strings.Contains(err.Error(), "chmod o+x") {
		t.Errorf("got %v", err)
	}
}

// A bad value of the browser section is an error naming its key.
func TestConfigErrorsNameTheKey(t *testing.T) {
	ch := &config.Checker{Section: "browser"}
	Config{Idle: time.Millisecond, PageTimeout: time.Millisecond, MaxBrowsers: -1, MaxText: -1, MaxElements: -1, MemoryMB: 10}.Check(ch)
	var got []string
	for _, err := range ch.Errors() {
		got = append(got, err.Error())
	}
	all := strings.Join(got, "\n")
	for _, key := range []string{"browser.idle", "browser.page_timeout", "browser.max_browsers", "browser.max_text", "browser.max_elements", "browser.memory_mb"} {
		if !strings.Contains(all, "config: "+key+": ") {
			t.Errorf("no error names %s:\n%s", key, all)
		}
	}
	ch = &config.Checker{Section: "browser"}
	Config{}.Check(ch)
	if len(ch.Errors()) != 0 {
		t.Errorf("the defaults: %v", ch.Errors())
	}
}

// A click whose next page is slow to answer is waited for, and the new
// page is what the call returns.
func TestClickWaitsForTheNextPage(t *testing.T) {
	release := make(chan struct{})
	good := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/next" {
			<-release
			html(`<title>Next</title><p>arrived</p>`).ServeHTTP(w, r)
			return
		}
		html(`<a href="/next">go on</a>`).ServeHTTP(w, r)
	}))
	m := manager(t, Config{})
	page, err := call(t, m, "test:click", map[string]any{"action": "open", "url": "http://good.test:" + good.port() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for !slices.Contains(good.requests(), "GET /next") {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Second) // the answer comes late: past the wait for a navigation to start
		close(release)
	}()
	out, err := call(t, m, "test:click", map[string]any{"action": "click", "ref": ref(t, page, "go on")})
	if err != nil || !strings.Contains(out, "Title: Next") || !strings.Contains(out, "arrived") {
		t.Errorf("%v\n%s", err, out)
	}
}
