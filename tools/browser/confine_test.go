package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"loadout/proc/proctest"
	"loadout/tools"
	"loadout/tools/guard"
)

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

// Where the kernel refuses chromium's sandbox (no user namespaces),
// chromium is started again without it, once for all, and works.
func TestSandboxRefusedFallsBack(t *testing.T) {
	chromium := Find()
	if chromium == "" {
		t.Skip("no chromium on this machine: apt-get install chromium (CI installs it)")
	}
	bin := filepath.Join(reachable(t), "chromium-without-userns")
	script := "#!/bin/sh\ncase \" $* \" in *\" --no-sandbox \"*) exec " + chromium + " \"$@\";; esac\necho 'No usable sandbox! (a kernel without user namespaces)' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	good := serve(t, html(`<p>still here</p>`))
	m := manager(t, Config{Path: bin})
	out, err := call(t, m, "test:sandbox", map[string]any{"action": "open", "url": "http://good.test:" + good.port() + "/"})
	if err != nil || !strings.Contains(out, "still here") || !m.unsandboxed.Load() {
		t.Fatalf("%v, unsandboxed %v\n%s", err, m.unsandboxed.Load(), out)
	}
}

// chromium runs with its sandbox on and, when loadout is root, as
// nobody: every one of its processes.
func TestChromiumRunsUnprivilegedWithItsSandbox(t *testing.T) {
	good := serve(t, html(`<p>hi</p>`))
	m := manager(t, Config{})
	if _, err := call(t, m, "test:user", map[string]any{"action": "open", "url": "http://good.test:" + good.port() + "/"}); err != nil {
		t.Fatal(err)
	}
	dir := m.Profile("test:user")
	entries, _ := os.ReadDir("/proc")
	seen := 0
	for _, e := range entries {
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if !strings.Contains(string(cmd), dir) {
			continue
		}
		seen++
		if strings.Contains(string(cmd), "--no-sandbox") {
			t.Errorf("process %s runs without the sandbox", e.Name())
		}
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if os.Geteuid() == 0 && !strings.Contains(string(st), "\nUid:\t65534\t") {
			t.Errorf("process %s does not run as nobody", e.Name())
		}
	}
	if seen < 2 {
		t.Errorf("%d of chromium's processes seen", seen)
	}
}
