package googletest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Request is one call an API fake received.
type Request struct {
	Method, Path string
	Query        url.Values
	// Header holds every request header.
	Header http.Header
	Body   string
	// User is the X-Test-User header set by Client.
	User string
	// Authorization is the Authorization header.
	Authorization string
}

// API is a fake Google API server: tests add answers per "METHOD /path"
// (a path ending in * matches every path with that prefix) and read back
// every request. Unknown routes answer Google's 404 error (see
// NewStrictAPI). It is safe for concurrent use.
type API struct {
	URL string

	t      testing.TB
	mu     sync.Mutex
	routes map[string]func(Request) (int, string)
	reqs   []Request
	strict bool   // unknown routes fail the test
	user   string // the X-Test-User every request must carry, if set
}

// NewAPI starts a fake on 127.0.0.1; it closes when the test ends.
func NewAPI(t testing.TB) *API {
	a := &API{t: t, routes: map[string]func(Request) (int, string){}}
	srv := httptest.NewServer(a)
	a.URL = srv.URL
	t.Cleanup(srv.Close)
	return a
}

// NewStrictAPI is NewAPI for a fake that fails the test on a request to a
// route without an answer (which gets 501 Not Implemented) and on one
// whose X-Test-User header is not user.
func NewStrictAPI(t testing.TB, user string) *API {
	a := NewAPI(t)
	a.strict, a.user = true, user
	return a
}

// Client returns a Client whose options reach this fake, with every
// person connected.
func (a *API) Client() *Client { return &Client{Endpoint: a.URL} }

// ServeHTTP records the request and answers from the routes. An answer
// that is not a JSON object is sent as text/plain.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(b),
		User: r.Header.Get("X-Test-User"), Authorization: r.Header.Get("Authorization")}
	key := r.Method + " " + r.URL.Path
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	h := a.route(key)
	a.mu.Unlock()
	if a.user != "" && req.User != a.user {
		a.t.Errorf("%s: X-Test-User = %q, want %q", key, req.User, a.user)
	}
	if h == nil && a.strict {
		a.t.Errorf("unexpected request %s?%s", key, r.URL.RawQuery)
		w.WriteHeader(http.StatusNotImplemented)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if h == nil {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":404,"message":"Requested entity was not found.","errors":[{"message":"Requested entity was not found.","domain":"global","reason":"notFound"}],"status":"NOT_FOUND"}}`)
		return
	}
	status, body := h(req)
	if !strings.HasPrefix(body, "{") {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// route returns the handler for key: the exact route, else the longest
// prefix route, else nil. a.mu must be held.
func (a *API) route(key string) func(Request) (int, string) {
	if h, ok := a.routes[key]; ok {
		return h
	}
	var best func(Request) (int, string)
	n := -1
	for k, h := range a.routes {
		if p, wild := strings.CutSuffix(k, "*"); wild && strings.HasPrefix(key, p) && len(p) > n {
			best, n = h, len(p)
		}
	}
	return best
}

// On answers "METHOD /path" with status and body.
func (a *API) On(methodPath string, status int, body string) {
	a.Handle(methodPath, func(Request) (int, string) { return status, body })
}

// Handle answers "METHOD /path" with h; a path ending in * matches every
// path with that prefix.
func (a *API) Handle(methodPath string, h func(Request) (int, string)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.routes[methodPath] = h
}

// Requests returns every request so far.
func (a *API) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.reqs...)
}

// Last returns the last request to "METHOD /path"; the test fails if
// there was none.
func (a *API) Last(methodPath string) Request {
	a.t.Helper()
	rs := a.Requests()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Method+" "+rs[i].Path == methodPath {
			return rs[i]
		}
	}
	a.t.Fatalf("no request %s; got %+v", methodPath, rs)
	return Request{}
}

// Count returns how many requests went to "METHOD /path".
func (a *API) Count(methodPath string) int {
	n := 0
	for _, r := range a.Requests() {
		if r.Method+" "+r.Path == methodPath {
			n++
		}
	}
	return n
}
