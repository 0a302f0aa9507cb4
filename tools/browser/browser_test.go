package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// keepABrowser is a loadout that opens a page in a browser whose
// profiles are in dir, says "started", and waits to be killed.
func keepABrowser(dir string) int {
	srv := httptest.NewServer(html(`<p>kept</p>`))
	defer srv.Close()
	g, _ := guard.New(guard.Config{AllowHosts: []string{"127.0.0.1"}})
	m, err := New(Config{Dir: dir}, Deps{Guard: g})
	if err != nil {
		return 1
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "test:kept"})
	b, _ := json.Marshal(map[string]string{"action": "open", "url": srv.URL})
	if _, err := m.Tool().Call(ctx, b); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("started")
	select {}
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

// refused is how many requests to host (host:port) chat's browser's
// proxy refused.
func refused(m *Manager, chat, host string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sessions[chat]; s != nil {
		return s.inst.proxy.refusals(host)
	}
	return -1
}

// The SSRF matrix: a page on an allowed host asks, in every way a page
// can, for a host the web tools may not reach (a name resolving to
// loopback at dial time, and a loopback address written out); the
// browser is refused each time and nothing arrives there, while the
// allowed host's own picture loads.
func TestPageReachesOnlyWhatTheWebToolsMay(t *testing.T) {
	evil := serve(t, html(`<p>secret</p>`))
	ep := evil.port()
	var good *site
	good = serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "http://evil.test:"+ep+"/redirected", http.StatusFound)
		case "/ok.png":
			w.Header().Set("Content-Type", "image/gif")
			w.Write([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
		default:
			html(`<!doctype html><title>Matrix</title><body><p>start</p>
<img src="http://evil.test:`+ep+`/img"><img src="/ok.png"><img src="/redirect">
<img src="http://rebind.test:`+ep+`/rebind">
<iframe src="http://evil.test:`+ep+`/frame"></iframe><iframe src="http://127.0.0.1:`+ep+`/literal"></iframe>
<script>
const note = s => { const p = document.createElement('p'); p.textContent = s; document.body.appendChild(p); };
fetch('http://evil.test:`+ep+`/fetch', {mode: 'no-cors'}).then(() => note('fetch answered'), () => note('fetch refused'));
const ws = new WebSocket('ws://evil.test:`+ep+`/ws');
ws.onopen = () => note('ws reached'); ws.onerror = () => note('ws refused');
</script>`).ServeHTTP(w, r)
		}
	}))
	m := manager(t, Config{})
	out, err := call(t, m, "test:ssrf", map[string]any{"action": "open", "url": "http://good.test:" + good.port() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "start") {
		t.Fatalf("the page did not load:\n%s", out)
	}
	// img, redirect target, iframe, fetch, WebSocket; rebind; literal.
	waitFor(t, "the browser's requests to be refused", func() bool {
		return refused(m, "test:ssrf", "evil.test:"+ep) >= 5 && refused(m, "test:ssrf", "rebind.test:"+ep) >= 1 &&
			refused(m, "test:ssrf", "127.0.0.1:"+ep) >= 1
	})
	out, err = call(t, m, "test:ssrf", map[string]any{"action": "scroll"})
	if err != nil {
		t.Fatal(err)
	}
	// fetch got loadout's refusal (an opaque answer in no-cors mode);
	// the WebSocket's tunnel was refused.
	for _, want := range []string{"fetch answered", "ws refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q:\n%s", want, out)
		}
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the host that is not allowed: %v", n, evil.requests())
	}
	if got := good.requests(); !slices.Contains(got, "GET /ok.png") || !slices.Contains(got, "GET /redirect") {
		t.Errorf("the allowed host's own requests did not arrive: %v", got)
	}
	// The document itself, by name and by address.
	out, err = call(t, m, "test:ssrf", map[string]any{"action": "open", "url": "http://evil.test:" + ep + "/"})
	if err != nil || !strings.Contains(out, "refused by loadout") || strings.Contains(out, "secret") {
		t.Errorf("opening the host that is not allowed: %v\n%s", err, out)
	}
	if _, err = call(t, m, "test:ssrf", map[string]any{"action": "open", "url": "http://127.0.0.1:" + ep + "/"}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("opening a loopback address: %v", err)
	}
	for _, u := range []string{"file:///etc/passwd", "data:text/html,<p>x</p>", "chrome://version"} {
		if _, err = call(t, m, "test:ssrf", map[string]any{"action": "open", "url": u}); err == nil {
			t.Errorf("opening %s was not refused", u)
		}
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the host that is not allowed: %v", n, evil.requests())
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
<label>Size <select name=size><option>S</option><option>M</option></select></label><button>Send order</button></form>`).ServeHTTP(w, r)
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
	if e != tools.EffectMutate || !strings.Contains(sum, "good.test") || !strings.Contains(sum, `name="Ana"`) || !strings.Contains(sum, `size="M"`) {
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
	if len(posted) != 1 || posted[0] != "/order name=Ana&size=M" {
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

// A page that eats memory crashes its renderer, and one that never
// stops running script hangs: each call comes back with a clear result
// within its time, and the chat's browser is closed. One still waiting
// for a picture is read as it is.
func TestMemoryBombAndHangingPage(t *testing.T) {
	good := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bomb":
			html(`<script>const a = []; for (;;) a.push(new Array(1e6).fill(Math.random()));</script>`).ServeHTTP(w, r)
		case "/slow.png":
			<-r.Context().Done() // never answers while the browser waits
		case "/slow":
			html(`<p>mostly here</p><img src="/slow.png">`).ServeHTTP(w, r)
		case "/hang":
			html(`<p>before</p><script>for (;;) {}</script>`).ServeHTTP(w, r)
		default:
			html(`<p>fine</p>`).ServeHTTP(w, r)
		}
	}))
	m := manager(t, Config{MemoryMB: 64, PageTimeout: 5 * time.Second})
	base := "http://good.test:" + good.port()
	start := time.Now()
	_, err := call(t, m, "test:bomb", map[string]any{"action": "open", "url": base + "/bomb"})
	if err == nil || !strings.Contains(err.Error(), "crashed") {
		t.Errorf("the memory bomb: %v", err)
	}
	_, err = call(t, m, "test:hang", map[string]any{"action": "open", "url": base + "/hang"})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 5s") {
		t.Errorf("the hanging page: %v", err)
	}
	// A picture that never comes: the page as it is, said so.
	out, err := call(t, m, "test:slow", map[string]any{"action": "open", "url": base + "/slow"})
	if err != nil || !strings.Contains(out, "mostly here") || !strings.Contains(out, "had not finished loading within 5s") {
		t.Errorf("the slow page: %v\n%s", err, out)
	}
	if _, err := call(t, m, "test:slow", map[string]any{"action": "close"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the two calls took %s", d)
	}
	if n := m.Running(); n != 0 {
		t.Errorf("%d browsers still run", n)
	}
	if out, err := call(t, m, "test:hang", map[string]any{"action": "open", "url": base + "/"}); err != nil || !strings.Contains(out, "fine") {
		t.Errorf("a page after: %v\n%s", err, out)
	}
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

// Killing loadout with SIGKILL leaves nothing of its browser running:
// the keeper kills chromium's whole group.
func TestBrowserDiesWithLoadout(t *testing.T) {
	if Find() == "" {
		t.Skip("no chromium on this machine: apt-get install chromium (CI installs it)")
	}
	dir := reachable(t)
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), "LOADOUT_TEST_BROWSER_PARENT="+dir)
	out, _ := parent.StdoutPipe()
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "started\n" {
		parent.Process.Kill()
		t.Fatalf("the loadout said %q, %v", line, err)
	}
	if n := proctest.Running(dir); n < 2 {
		t.Fatalf("only %d of chromium's processes run", n)
	}
	parent.Process.Signal(syscall.SIGKILL)
	parent.Wait()
	if n := proctest.Left(dir, 10*time.Second); n != 0 {
		t.Fatalf("%d of chromium's processes outlived loadout's SIGKILL", n)
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

// WebRTC sends no UDP around the proxy, and a download is refused:
// nothing of it is written anywhere in the browser's folders.
func TestNoUDPAndNoDownloads(t *testing.T) {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	good := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/file" {
			w.Header().Set("Content-Disposition", `attachment; filename="loadout-download-marker.txt"`)
			w.Header().Set("Content-Type", "application/octet-stream")
			fmt.Fprint(w, "downloaded")
			return
		}
		html(`<p>rtc</p><a href="/file" download>get the file</a><script>
const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:`+udp.LocalAddr().String()+`'}]});
pc.createDataChannel('x');
pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === 'complete') document.body.append('gathering complete'); };
pc.createOffer().then(o => pc.setLocalDescription(o));
</script>`).ServeHTTP(w, r)
	}))
	m := manager(t, Config{})
	const chat = "test:udp"
	page, err := call(t, m, chat, map[string]any{"action": "open", "url": "http://good.test:" + good.port() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ICE gathering to complete", func() bool {
		out, err := call(t, m, chat, map[string]any{"action": "scroll"})
		return err == nil && strings.Contains(out, "gathering complete")
	})
	udp.SetReadDeadline(time.Now())
	if n, _, err := udp.ReadFrom(make([]byte, 1500)); err == nil {
		t.Errorf("a %d-byte UDP packet left the browser", n)
	}
	call(t, m, chat, map[string]any{"action": "click", "ref": ref(t, page, "get the file")})
	waitFor(t, "the download's request", func() bool { return slices.Contains(good.requests(), "GET /file") })
	// The browser is asked something after the refusal, so the download,
	// were it written, would be.
	call(t, m, chat, map[string]any{"action": "scroll"})
	for _, root := range []string{m.Profile(chat), os.TempDir()} {
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && strings.Contains(d.Name(), "loadout-download-marker") {
				t.Errorf("the download was written: %s", path)
			}
			return nil
		})
	}
}

// browser.max_browsers bounds the browsers at once: another chat waits
// for a place within its call, then is told to try later.
func TestMaxBrowsers(t *testing.T) {
	good := serve(t, html(`<p>one</p>`))
	m := manager(t, Config{MaxBrowsers: 1, PageTimeout: 2 * time.Second})
	url := "http://good.test:" + good.port() + "/"
	if _, err := call(t, m, "test:a", map[string]any{"action": "open", "url": url}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, m, "test:b", map[string]any{"action": "open", "url": url}); err == nil || !strings.Contains(err.Error(), "browser.max_browsers") {
		t.Errorf("a second chat's browser: %v", err)
	}
	if _, err := call(t, m, "test:a", map[string]any{"action": "close"}); err != nil {
		t.Fatal(err)
	}
	if out, err := call(t, m, "test:b", map[string]any{"action": "open", "url": url}); err != nil || !strings.Contains(out, "one") {
		t.Errorf("once a place came free: %v %s", err, out)
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

// Another process on the machine cannot use a running browser's proxy
// to reach what the browser may: the proxy takes connections only from
// chromium's own processes.
func TestProxyServesOnlyItsBrowser(t *testing.T) {
	good := serve(t, html(`<p>mine</p>`))
	m := manager(t, Config{})
	url := "http://good.test:" + good.port() + "/"
	if _, err := call(t, m, "test:proxy", map[string]any{"action": "open", "url": url}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	px := m.sessions["test:proxy"].inst.proxy
	m.mu.Unlock()
	before := good.hits.Load()
	proxyURL, _ := neturl.Parse("http://" + px.addr())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 10 * time.Second}
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("a stranger's request through the proxy got %s", resp.Status)
	}
	if got := good.hits.Load(); got != before {
		t.Errorf("%d requests of a stranger arrived", got-before)
	}
	if px.strangers.Load() == 0 {
		t.Error("the proxy counted no stranger")
	}
}

// A service worker (which needs a secure context: here localhost, let
// through as an allowed host) fetches through the same proxy: its
// request to a host that is not allowed is refused, and nothing arrives.
func TestServiceWorkerGoesThroughTheProxy(t *testing.T) {
	evil := serve(t, html(`secret`))
	good := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sw.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprintf(w, `self.addEventListener('install', e => e.waitUntil(fetch('http://evil.test:%s/from-sw', {mode: 'no-cors'}).catch(() => {})));`, evil.port())
		default:
			html(`<p>sw</p><script>navigator.serviceWorker.register('/sw.js').then(r => document.body.append(' registered'), e => document.body.append(' failed ' + e));</script>`).ServeHTTP(w, r)
		}
	}))
	m := manager(t, Config{})
	const chat = "test:sw"
	if _, err := call(t, m, chat, map[string]any{"action": "open", "url": "http://localhost:" + good.port() + "/"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the service worker's script to be fetched", func() bool { return slices.Contains(good.requests(), "GET /sw.js") })
	waitFor(t, "the service worker's request to be refused", func() bool { return refused(m, chat, "evil.test:"+evil.port()) >= 1 })
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the host that is not allowed: %v", n, evil.requests())
	}
}
