package manifest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"loadout/tools"
)

// TEST-040-10: a manifest with _meta.
func TestMetaEntryDefinesGroupAndIsNotATool(t *testing.T) {
	l, err := Parse([]byte(`[
	  {"_meta": true, "display_name": "Google Gmail", "description": "Email tools & more <b>"},
	  {"name": "gmail_search", "description": "Search", "http": {"url": "http://127.0.0.1:1/x"}}
	]`), "google_gmail", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tools) != 1 || l.Tools[0].Name != "gmail_search" {
		t.Fatalf("tools = %+v", l.Tools)
	}
	if l.Group.DisplayName != "Google Gmail" || l.Group.Description != "Email tools & more <b>" {
		t.Fatalf("group = %+v", l.Group)
	}
}

// TEST-040-11: without _meta the metadata is derived.
func TestMissingMetaIsDerived(t *testing.T) {
	l, err := Parse([]byte(`[
	  {"name": "tool1", "description": "Tool 1", "http": {"url": "http://127.0.0.1:1/a"}},
	  {"name": "tool2", "description": "Tool 2", "http": {"url": "http://127.0.0.1:1/b"}}
	]`), "my_tools", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tools) != 2 || l.Group.DisplayName != "My Tools" || l.Group.Description != "Tools: tool1, tool2" {
		t.Fatalf("loaded = %+v", l.Group)
	}
}

func TestMetaOnlyGroupIsEmpty(t *testing.T) {
	l, err := Parse([]byte(`[{"_meta": true, "display_name": "Nothing", "description": "none"}]`), "nothing", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := tools.NewRegistry()
	r.Add(tools.LoadGroup(r))
	if err := r.AddGroup(l.Group, l.Tools...); err != nil {
		t.Fatal(err)
	}
	res := tools.NewExecutor(r, nil).Run(context.Background(), nil, []tools.Call{{ID: "1", Name: "load_tool_group", Arguments: `{"group_name":"nothing"}`}})[0]
	if res.Code != tools.CodeEmptyGroup {
		t.Fatalf("result = %+v", res)
	}
}

func TestBadManifests(t *testing.T) {
	for _, raw := range []string{
		`{"name": "x"}`,
		`[{"name": "x", "description": "d"}]`,
		`[{"name": "x", "description": "d", "http": {"url": "file:///etc/passwd"}}]`,
		`[{"name": "x", "description": "d", "http": {"url": "http://a/", "method": "DELETE"}}]`,
		`[{"description": "d", "http": {"url": "http://a/"}}]`,
		`[{"name": "x", "description": "d", "effect": "harmless", "http": {"url": "http://a/"}}]`,
	} {
		if _, err := Parse([]byte(raw), "g", nil); err == nil {
			t.Errorf("accepted %s", raw)
		}
	}
}

func TestToolsCallEndpoints(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/now":
			var in map[string]string
			json.NewDecoder(r.Body).Decode(&in)
			if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer k1" {
				http.Error(w, "bad", 400)
				return
			}
			io.WriteString(w, `{"city":"`+in["city"]+`","temp":21}`)
		case "/get":
			io.WriteString(w, "q="+r.URL.Query().Get("q"))
		case "/fail":
			http.Error(w, "down", 503)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "weather.json"), []byte(`[
	  {"_meta": true, "display_name": "Weather", "description": "Weather now"},
	  {"name": "weather_now", "description": "Now", "parameters": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},
	   "http": {"url": "`+srv.URL+`/now", "headers": {"Authorization": "Bearer ${WEATHER_KEY}"}}},
	  {"name": "weather_get", "description": "Get", "parameters": {"type":"object","properties":{"q":{"type":"string"}}},
	   "http": {"method": "GET", "url": "`+srv.URL+`/get"}},
	  {"name": "weather_fail", "description": "Fails", "http": {"url": "`+srv.URL+`/fail"}}
	]`), 0o600)
	t.Setenv("WEATHER_KEY", "k1")
	loaded, err := LoadDir(dir, srv.Client())
	if err != nil || len(loaded) != 1 {
		t.Fatalf("LoadDir = %v, %v", loaded, err)
	}
	r := tools.NewRegistry()
	if err := r.AddGroup(loaded[0].Group, loaded[0].Tools...); err != nil {
		t.Fatal(err)
	}
	res := tools.NewExecutor(r, nil).Run(context.Background(), nil, []tools.Call{
		{ID: "1", Name: "weather_now", Arguments: `{"city":"Porto"}`},
		{ID: "2", Name: "weather_get", Arguments: `{"q":"a b"}`},
		{ID: "3", Name: "weather_fail", Arguments: `{}`},
		{ID: "4", Name: "weather_now", Arguments: `{}`},
	})
	if res[0].Status != tools.StatusSuccess || !strings.Contains(res[0].Content, `"city":"Porto"`) {
		t.Errorf("POST tool = %+v", res[0])
	}
	if res[1].Content != "q=a b" {
		t.Errorf("GET tool = %+v", res[1])
	}
	if res[2].Code != tools.CodeUnavailable {
		t.Errorf("failing endpoint = %+v", res[2])
	}
	if res[3].Code != tools.CodeMissingParameter {
		t.Errorf("schema from the manifest not enforced: %+v", res[3])
	}
}

// Found by probing: a GET tool's fixed query parameters could be
// replaced by the model's arguments (reaching the endpoint with the
// operator's token as another user), undeclared arguments were passed
// on, and a redirect took the request with its headers anywhere.
func TestFixedPartsAndUndeclaredArgumentsAndRedirects(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect to another host was followed, with Authorization %q", r.Header.Get("Authorization"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RawQuery)
		mu.Unlock()
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/steal", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/data?user=alice", http.StatusFound)
		default:
			io.WriteString(w, "user="+r.URL.Query().Get("user")+" scope="+r.URL.Query().Get("scope")+" day="+r.URL.Query().Get("day"))
		}
	}))
	defer srv.Close()
	l, err := Parse([]byte(`[
	  {"name": "report", "description": "Report", "parameters": {"type":"object","properties":{"day":{"type":"string"}}},
	   "http": {"method": "GET", "url": "`+srv.URL+`/data?user=alice&scope=readonly", "headers": {"Authorization": "Bearer operator"}}},
	  {"name": "open_report", "description": "Report", "parameters": {"type":"object","properties":{"day":{"type":"string"}},"additionalProperties":true},
	   "http": {"method": "GET", "url": "`+srv.URL+`/data"}},
	  {"name": "moved", "description": "Moved", "http": {"method": "GET", "url": "`+srv.URL+`/moved", "headers": {"Authorization": "Bearer operator"}}},
	  {"name": "here", "description": "Same host", "http": {"method": "GET", "url": "`+srv.URL+`/here"}}
	]`), "reports", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := tools.NewRegistry()
	if err := r.AddGroup(l.Group, l.Tools...); err != nil {
		t.Fatal(err)
	}
	res := tools.NewExecutor(r, nil).Run(context.Background(), nil, []tools.Call{
		{ID: "1", Name: "report", Arguments: `{"day":"mon"}`},
		{ID: "2", Name: "report", Arguments: `{"user":"mallory","scope":"admin"}`},
		{ID: "3", Name: "report", Arguments: `{"day":"mon","verbose":"yes"}`},
		{ID: "4", Name: "open_report", Arguments: `{"day":"tue","user":"bob"}`},
		{ID: "5", Name: "moved", Arguments: `{}`},
		{ID: "6", Name: "here", Arguments: `{}`},
	})
	if res[0].Content != "user=alice scope=readonly day=mon" {
		t.Errorf("a declared argument: %+v", res[0])
	}
	mu.Lock()
	all := strings.Join(seen, " ")
	mu.Unlock()
	if res[1].Status != tools.StatusError || strings.Contains(all, "mallory") {
		t.Errorf("fixed parameters were replaced: %+v (the endpoint saw %q)", res[1], seen)
	}
	if res[2].Code != tools.CodeInvalidArgument || !strings.Contains(res[2].Content, "verbose") {
		t.Errorf("an undeclared argument was accepted: %+v", res[2])
	}
	if res[3].Content != "user=bob scope= day=tue" {
		t.Errorf("additionalProperties true in the manifest is honoured: %+v", res[3])
	}
	if res[4].Code != tools.CodeUnavailable || !strings.Contains(res[4].Content, "redirected") {
		t.Errorf("a redirect to another host: %+v", res[4])
	}
	if res[5].Content != "user=alice scope= day=" {
		t.Errorf("a redirect within the host was not followed: %+v", res[5])
	}
}

// A {name} in the URL's path is filled from that argument, escaped to
// stay one segment; the rest of the URL is fixed.
func TestURLTemplates(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	l, err := Parse([]byte(`[{"name": "item", "description": "An item", "http": {"method": "GET", "url": "`+srv.URL+`/items/{id}?v=1"},
	  "parameters": {"type":"object","properties":{"id":{"type":"string"},"lang":{"type":"string"}},"required":["id"]}}]`), "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := tools.NewRegistry()
	r.AddGroup(l.Group, l.Tools...)
	res := tools.NewExecutor(r, nil).Run(context.Background(), nil, []tools.Call{
		{ID: "1", Name: "item", Arguments: `{"id":"a/../../admin","lang":"pt"}`},
		{ID: "2", Name: "item", Arguments: `{"id":".."}`},
		{ID: "3", Name: "item", Arguments: `{"lang":"pt"}`},
	})
	mu.Lock()
	defer mu.Unlock()
	if res[0].Content != "ok" || len(paths) != 1 || paths[0] != "/items/a%2F..%2F..%2Fadmin?lang=pt&v=1" {
		t.Errorf("filled: %+v, the endpoint saw %q", res[0], paths)
	}
	if res[1].Code != tools.CodeInvalidArgument || res[2].Code != tools.CodeMissingParameter {
		t.Errorf("refusals: %+v %+v", res[1], res[2])
	}
	if _, err := Parse([]byte(`[{"name": "x", "description": "d", "http": {"method": "GET", "url": "http://a/{nope}"}}]`), "g", nil); err == nil || !strings.Contains(err.Error(), "{nope}") {
		t.Errorf("an undeclared placeholder: %v", err)
	}
}

// A manifest tool's effect decides whether the person approves its calls.
func TestManifestEffects(t *testing.T) {
	l, err := Parse([]byte(`[
		{"name": "a_get", "description": "d", "read_only": true, "http": {"url": "http://a/"}},
		{"name": "a_set", "description": "d", "http": {"url": "http://a/"}},
		{"name": "a_pay", "description": "d", "effect": "destructive", "http": {"url": "http://a/"}}]`), "g", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tools.Effect{"a_get": tools.EffectRead, "a_set": tools.EffectMutate, "a_pay": tools.EffectDestructive}
	if len(l.Tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(l.Tools), len(want))
	}
	for _, tl := range l.Tools {
		if got := tools.EffectOf(context.Background(), tl.Definition, nil); got != want[tl.Name] {
			t.Errorf("%s: %v, want %v", tl.Name, got, want[tl.Name])
		}
	}
}
