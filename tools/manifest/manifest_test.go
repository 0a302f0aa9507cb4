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
	  {"name": "weather_get", "description": "Get", "http": {"method": "GET", "url": "`+srv.URL+`/get"}},
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
