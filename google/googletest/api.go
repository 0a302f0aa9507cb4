package googletest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Request is one call an API fake received.
type Request struct {
	Method, Path string
	Query        url.Values
	Body         string
	// User is the X-Test-User header set by Client.
	User string
	// Authorization is the Authorization header.
	Authorization string
}

// API is a fake Google API server: tests add answers per "METHOD /path"
// and read back every request. Unknown routes answer Google's 404 error.
// It is safe for concurrent use.
type API struct {
	URL string

	t      testing.TB
	mu     sync.Mutex
	routes map[string]func(Request) (int, string)
	reqs   []Request
}

// NewAPI starts a fake on 127.0.0.1; it closes when the test ends.
func NewAPI(t testing.TB) *API {
	a := &API{t: t, routes: map[string]func(Request) (int, string){}}
	srv := httptest.NewServer(a)
	a.URL = srv.URL
	t.Cleanup(srv.Close)
	return a
}

// ServeHTTP records the request and answers from the routes.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: string(b),
		User: r.Header.Get("X-Test-User"), Authorization: r.Header.Get("Authorization")}
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	h, ok := a.routes[r.Method+" "+r.URL.Path]
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":404,"message":"Requested entity was not found.","errors":[{"message":"Requested entity was not found.","domain":"global","reason":"notFound"}],"status":"NOT_FOUND"}}`)
		return
	}
	status, body := h(req)
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// On answers "METHOD /path" with status and body.
func (a *API) On(methodPath string, status int, body string) {
	a.Handle(methodPath, func(Request) (int, string) { return status, body })
}

// Handle answers "METHOD /path" with h.
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
