package gmail_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/google"
	"loadout/google/gmail"
	"loadout/google/googletest"
	"loadout/tools"
)

// request is one call the fake received.
type request struct {
	Method, Path string
	Query        url.Values
	Body         string
	User         string
}

// fake is a Gmail API server: tests add answers per "METHOD path" and read
// back every request.
type fake struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	routes  map[string]func(r request) (int, string)
	reqs    []request
	allowed string // the only user key that may call, if set
}

func newFake(t *testing.T) *fake {
	f := &fake{t: t, routes: map[string]func(request) (int, string){}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	req := request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: string(b), User: r.Header.Get("X-Test-User")}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	h, ok := f.routes[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
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

// on answers METHOD path with status and body.
func (f *fake) on(methodPath string, status int, body string) {
	f.handle(methodPath, func(request) (int, string) { return status, body })
}

func (f *fake) handle(methodPath string, h func(request) (int, string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[methodPath] = h
}

func (f *fake) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

// last returns the last request to METHOD path.
func (f *fake) last(methodPath string) request {
	f.t.Helper()
	rs := f.requests()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Method+" "+rs[i].Path == methodPath {
			return rs[i]
		}
	}
	f.t.Fatalf("no request %s; got %+v", methodPath, rs)
	return request{}
}

func (f *fake) count(methodPath string) int {
	n := 0
	for _, r := range f.requests() {
		if r.Method+" "+r.Path == methodPath {
			n++
		}
	}
	return n
}

const user = "telegram:42"

// kit is the group under test against a fake.
type kit struct {
	f      *fake
	tools  map[string]tools.Tool
	group  tools.Group
	client *googletest.Client
}

func newKit(t *testing.T) *kit {
	f := newFake(t)
	c := &googletest.Client{Endpoint: f.srv.URL}
	g, ts := gmail.New(gmail.Config{Client: c, Backoff: google.Backoff{Attempts: 3, Initial: time.Millisecond}})
	k := &kit{f: f, tools: map[string]tools.Tool{}, group: g, client: c}
	for _, tool := range ts {
		k.tools[tool.Name] = tool
	}
	return k
}

func ctxAs(u string) context.Context {
	return tools.WithCaller(context.Background(), tools.Caller{ChatKey: "telegram:-1001", UserKey: u})
}

// call runs a tool as user and returns its result as a generic JSON map.
func (k *kit) call(t *testing.T, name, args string) (map[string]any, error) {
	t.Helper()
	tool, ok := k.tools[name]
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	res, err := tool.Run(ctxAs(user), json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %s", err, b)
	}
	return m, nil
}

func (k *kit) mustCall(t *testing.T, name, args string) map[string]any {
	t.Helper()
	m, err := k.call(t, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func errCode(err error) string {
	if te, ok := err.(*tools.Error); ok {
		return te.Code
	}
	return ""
}

func b64(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }

func toJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func newServer(t *testing.T, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
