package browser

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"loadout/tools/guard"
)

// proxy is the HTTP forward proxy a browser is told to use for every
// request it makes: documents, subresources, fetch/XHR, iframes,
// WebSockets, service workers and redirects alike (a redirect is handed
// back to the browser, whose next request comes here again). Each
// request's URL passes the guard's CheckURL, and each connection is
// dialled by the guard, which checks the resolved address at dial time,
// so a DNS answer that changes between lookups is refused too. It
// listens on 127.0.0.1 on a port of its own, one per browser.
type proxy struct {
	guard *guard.Guard
	log   *slog.Logger
	ln    *ownListener
	srv   *http.Server
	rp    *httputil.ReverseProxy
	// refused counts the requests refused, strangers the connections
	// from other processes; for the tests and the log.
	refused, strangers atomic.Int64
	mu                 sync.Mutex
	tunnels            map[net.Conn]struct{}
	// refusedHosts counts the refusals by host:port, for the tests and
	// the log; at most maxRefusedHosts hosts are kept.
	refusedHosts map[string]int
}

const maxRefusedHosts = 256

// startProxy listens on 127.0.0.1 and serves until close. It takes
// connections only from the browser's processes, once own names them.
func startProxy(g *guard.Guard, log *slog.Logger) (*proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ln := &ownListener{Listener: l}
	p := &proxy{guard: g, log: log, ln: ln, tunnels: map[net.Conn]struct{}{}, refusedHosts: map[string]int{}}
	ln.strangers = &p.strangers
	tr := g.Transport()
	tr.ForceAttemptHTTP2 = false
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = r.In.URL
			r.Out.Host = r.In.Host
			r.Out.Header.Del("Proxy-Connection")
			r.Out.Header.Del("Proxy-Authorization")
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.refuse(w, r.URL.Host, err)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// own takes connections from the process tree rooted at pid (the
// browser's keeper) alone.
func (p *proxy) own(pid int) { p.ln.root.Store(int64(pid)) }

// ownListener accepts only connections made by the processes of the
// tree rooted at root: another local process cannot use the proxy to
// reach what the browser may (web.allow_hosts). Until root is set it
// accepts none.
type ownListener struct {
	net.Listener
	root      atomic.Int64
	strangers *atomic.Int64
}

func (l *ownListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if peerIsTree(c, int(l.root.Load())) {
			return c, nil
		}
		l.strangers.Add(1)
		c.Close()
	}
}

// addr is the proxy's address, host:port.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// close stops the proxy and every tunnel it holds.
func (p *proxy) close() {
	p.srv.Close()
	p.mu.Lock()
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
}

func (p *proxy) refuse(w http.ResponseWriter, host string, err error) {
	p.refused.Add(1)
	p.mu.Lock()
	if _, ok := p.refusedHosts[host]; ok || len(p.refusedHosts) < maxRefusedHosts {
		p.refusedHosts[host]++
	}
	p.mu.Unlock()
	code := http.StatusBadGateway
	if guard.IsBlocked(err) {
		code = http.StatusForbidden
	}
	p.log.Debug("browser: request refused", "host", host, "err", err)
	http.Error(w, "refused by loadout: "+err.Error(), code)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() {
		// Not a proxy request: someone asked the proxy itself.
		p.refuse(w, r.Host, &guard.BlockedError{Host: r.Host, Reason: "not a proxy request"})
		return
	}
	if err := p.guard.CheckURL(r.URL); err != nil {
		p.refuse(w, r.URL.Host, err)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// connect tunnels a CONNECT (HTTPS, and WebSockets through a proxy) to
// an address the guard dials.
func (p *proxy) connect(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		p.refuse(w, host, &guard.BlockedError{Host: host, Reason: "CONNECT needs host:port"})
		return
	}
	u := &url.URL{Scheme: "https", Host: host}
	if err := p.guard.CheckURL(u); err != nil {
		p.refuse(w, host, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	up, err := p.guard.DialContext(ctx, "tcp", host)
	cancel()
	if err != nil {
		p.refuse(w, host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	p.track(up, down)
	go func() {
		defer p.untrack(up, down)
		done := make(chan struct{}, 2)
		go func() {
			if n := buf.Reader.Buffered(); n > 0 {
				b, _ := buf.Reader.Peek(n)
				up.Write(b)
			}
			io.Copy(up, down)
			closeWrite(up)
			done <- struct{}{}
		}()
		go func() {
			io.Copy(down, up)
			closeWrite(down)
			done <- struct{}{}
		}()
		<-done
		<-done
	}()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.tunnels[c] = struct{}{}
	}
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.tunnels, c)
	}
}

// refusals is how often requests to host (host:port) were refused.
func (p *proxy) refusals(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusedHosts[host]
}

// hostOf is a URL's host, lower-cased, for what the person reads.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}
