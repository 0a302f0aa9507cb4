package googletest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

func get(t *testing.T, url, user string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test-User", user)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(b)
}

func TestAPIPrefixRoutesAndCounts(t *testing.T) {
	a := NewAPI(t)
	a.On("GET /v1/items/*", 200, `{"any":true}`)
	a.On("GET /v1/items/sub/*", 200, "sub")
	a.On("GET /v1/items/exact", 200, `{"exact":true}`)
	for path, want := range map[string]string{"/v1/items/exact": `{"exact":true}`, "/v1/items/x": `{"any":true}`, "/v1/items/sub/y": "sub"} {
		if _, _, body := get(t, a.URL+path, "u"); body != want {
			t.Errorf("GET %s = %q, want %q", path, body, want)
		}
	}
	if _, ct, _ := get(t, a.URL+"/v1/items/sub/z", "u"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type of a plain answer = %q", ct)
	}
	if status, _, _ := get(t, a.URL+"/v1/other", "u"); status != 404 {
		t.Errorf("unknown route status = %d, want 404", status)
	}
	if n := a.Count("GET /v1/items/sub/z"); n != 1 {
		t.Errorf("Count = %d, want 1", n)
	}
	if h := a.Last("GET /v1/items/x").Header.Get("X-Test-User"); h != "u" {
		t.Errorf("recorded X-Test-User header = %q", h)
	}
}

func TestStrictAPIFailsUnknownRoutesAndOtherUsers(t *testing.T) {
	rec := &recorder{TB: t}
	a := NewStrictAPI(rec, "telegram:1")
	a.On("GET /known", 200, `{}`)
	if status, _, _ := get(t, a.URL+"/known", "telegram:1"); status != 200 || len(rec.errors()) != 0 {
		t.Fatalf("known route as the user: status %d, errors %q", status, rec.errors())
	}
	if status, _, _ := get(t, a.URL+"/unknown", "telegram:1"); status != http.StatusNotImplemented {
		t.Errorf("unknown route status = %d, want 501", status)
	}
	get(t, a.URL+"/known", "telegram:2")
	errs := rec.errors()
	if len(errs) != 2 || !strings.Contains(errs[0], "unexpected request GET /unknown") || !strings.Contains(errs[1], `X-Test-User = "telegram:2"`) {
		t.Errorf("errors = %q", errs)
	}
}
