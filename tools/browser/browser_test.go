package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loadout/proc"
	"loadout/tools"
	"loadout/tools/guard"
)

func TestMain(m *testing.M) {
	proc.Serve()
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

func serve(t *testing.T, h http.Handler) *site {
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
	case "good.test", "evil.test":
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
func manager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	if Find() == "" {
		t.Skip("no chromium on this machine: apt-get install chromium (CI installs it)")
	}
	if cfg.Guard == nil {
		n := &names{}
		g, err := guard.New(guard.Config{AllowHosts: []string{"good.test"}, LookupIP: n.lookup})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Guard = g
	}
	cfg.Dir = reachable(t)
	cfg.Enabled = true
	m, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// call runs the browser tool for chat as the executor would, without
// its gate.
func call(t *testing.T, m *Manager, chat string, args any) (string, error) {
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
func reachable(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
