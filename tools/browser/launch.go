package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"loadout/proc"
)

// nobody is the user chromium runs as when loadout runs as root.
const nobody = 65534

// startTimeout bounds chromium's start, apart from browser.page_timeout:
// a loaded machine may take seconds to start it, however fast pages are.
const startTimeout = 30 * time.Second

// Find is the path of Debian's chromium (or another Chrome found on
// PATH), "" when none is installed.
func Find() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// flags are chromium's switches: headless, no first-run work, every
// request through the proxy (loopback included: chromium bypasses a
// proxy for localhost unless told <-loopback>), no name resolution of
// its own, no QUIC, no WebRTC over anything but the proxy, no
// background traffic, and a V8 heap cap per renderer.
func flags(c Config, proxyAddr, profile string, sandbox bool) []string {
	f := []string{
		"--headless", "--remote-debugging-pipe", "--user-data-dir=" + profile,
		"--proxy-server=http://" + proxyAddr, "--proxy-bypass-list=<-loopback>",
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
		"--disable-quic", "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
		"--webrtc-ip-handling-policy=disable_non_proxied_udp",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
		"--disable-breakpad", "--disable-crash-reporter", "--no-pings", "--disable-domain-reliability",
		"--disable-client-side-phishing-detection", "--metrics-recording-only", "--mute-audio",
		"--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars", "--password-store=basic",
		"--use-mock-keychain", "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,DialMediaRouteProvider",
		"--js-flags=--max-old-space-size=" + strconv.Itoa(c.MemoryMB),
		"--window-size=1280,900",
	}
	if !sandbox {
		f = append(f, "--no-sandbox")
	}
	return append(f, "about:blank")
}

// instance is one running chromium, driven over its DevTools pipe.
type instance struct {
	cmd    *proc.Cmd
	proxy  *proxy
	cancel context.CancelFunc
	// tab is the chromedp context of its one page.
	tab       context.Context
	cancelTab context.CancelFunc
	stderr    *tailBuffer
	exited    chan struct{}
}

// launch starts chromium under the kill-on-death keeper, as nobody when
// loadout runs as root, with its profile in dir (made nobody's).
func (m *Manager) launch(dir string) (*instance, error) {
	px, err := startProxy(m.deps.Guard, m.log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	inst := &instance{proxy: px, cancel: cancel, stderr: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	fail := func(err error) (*instance, error) {
		cancel()
		px.close()
		return nil, err
	}
	args := flags(m.cfg, px.addr(), dir, !m.unsandboxed.Load())
	name := m.path
	if os.Geteuid() == 0 && !m.cfg.keepUser {
		if _, err := exec.LookPath("setpriv"); err != nil {
			return fail(errors.New("browser: loadout runs as root, and chromium runs as nobody through setpriv, which is not installed (apt-get install util-linux)"))
		}
		if err := searchable(filepath.Dir(dir)); err != nil {
			return fail(err)
		}
		if err := os.Chown(dir, nobody, nobody); err != nil {
			return fail(err)
		}
		args = append([]string{"--reuid=" + strconv.Itoa(nobody), "--regid=" + strconv.Itoa(nobody), "--clear-groups", "--", m.path}, args...)
		name = "setpriv"
	}
	// The pipe: chromium reads commands on its fd 3 and writes answers
	// on its fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return fail(err)
	}
	cmd := proc.Command(ctx, name, args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_CACHE_HOME=" + dir,
		"LANG=C.UTF-8", "TZ=UTC"}
	cmd.Dir = dir
	cmd.ExtraFiles = []*os.File{cmdR, resW}
	cmd.Stdout, cmd.Stderr = inst.stderr, inst.stderr
	if err := cmd.Start(); err != nil {
		cmdR.Close()
		cmdW.Close()
		resR.Close()
		resW.Close()
		return fail(fmt.Errorf("start chromium: %w", err))
	}
	cmdR.Close()
	resW.Close()
	px.own(cmd.Process.Pid)
	inst.cmd = cmd
	go func() {
		cmd.Wait()
		close(inst.exited)
	}()
	conn := chromedp.NewPipeConn(resR, cmdW)
	alloc, _ := chromedp.NewAllocatorContext(ctx, &pipeAllocator{conn: conn})
	inst.tab, inst.cancelTab = chromedp.NewContext(alloc)
	// The first action starts the browser with the context it is given,
	// which must live as long as the browser: a timer bounds it instead.
	slow := time.AfterFunc(startTimeout, inst.cancelTab)
	defer slow.Stop()
	err = chromedp.Do(inst.tab, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		b := chromedp.FromContext(ctx).Browser
		_, err := cdp.Call(ctx, b, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny})
		return err
	}))
	if err != nil {
		inst.close()
		return nil, fmt.Errorf("chromium did not start: %w (%s)", err, inst.stderr.String())
	}
	return inst, nil
}

// close ends chromium (the keeper kills its whole group) and the proxy.
func (i *instance) close() {
	if i.cancelTab != nil {
		i.cancelTab()
	}
	i.cancel()
	if i.cmd != nil {
		<-i.exited
	}
	i.proxy.close()
}

// pipeAllocator hands chromedp the browser already started.
type pipeAllocator struct {
	conn *chromedp.PipeConn
	once sync.Once
}

func (a *pipeAllocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	var b *chromedp.Browser
	err := errors.New("browser: allocated twice")
	a.once.Do(func() { b, err = chromedp.NewBrowserTransport(ctx, a.conn, opts...) })
	return b, err
}

func (a *pipeAllocator) Wait() {}

// searchable reports, naming the key, a folder on the way to the
// profiles that nobody, the user chromium runs as, cannot pass through.
func searchable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("browser.dir: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("browser.dir: chromium runs as nobody (uid %d) and cannot pass through %s: make it searchable (chmod o+x %s) or choose another browser.dir", nobody, d, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

// gone reports whether chromium has exited.
func (i *instance) gone() bool {
	select {
	case <-i.exited:
		return true
	default:
		return false
	}
}
