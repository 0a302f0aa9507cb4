package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The credentials a URL, a DSN or a command line carries are masked for
// display and given, as written and as meant, to whatever must keep
// them; the rest of the value stays.
func TestCarriedCredentials(t *testing.T) {
	for _, c := range []struct {
		in      []string
		shown   []string
		secrets []string
	}{
		{[]string{"postgres://loadout:hunter2@db/x?sslmode=disable"}, []string{"postgres://loadout:*@db/x?sslmode=disable"}, []string{"hunter2"}},
		{[]string{"postgres://loadout@db/x"}, []string{"postgres://loadout@db/x"}, nil},
		{[]string{"postgres://u:p%40ss%2Fw@db/x"}, []string{"postgres://u:*@db/x"}, []string{"p%40ss%2Fw", "p@ss/w"}},
		{[]string{"host=db user=loadout password=hunter2 dbname=x"}, []string{"host=db user=loadout password=* dbname=x"}, []string{"hunter2"}},
		{[]string{`host=db password='hun ter\'2' sslmode=require`}, []string{`host=db password='*' sslmode=require`}, []string{`hun ter\'2`, `hun ter'2`}},
		{[]string{"https://u:pw@llm.example/v1"}, []string{"https://u:*@llm.example/v1"}, []string{"pw"}},
		{[]string{"https://ghp_abc@git.example/r"}, []string{"https://*@git.example/r"}, []string{"ghp_abc"}},
		{[]string{"https://mcp.example/sse?api_key=k1&team=blue&X-Token=t%2B1#frag"}, []string{"https://mcp.example/sse?api_key=*&team=blue&X-Token=*#frag"}, []string{"k1", "t%2B1", "t+1"}},
		{[]string{"https://api.example/v1"}, []string{"https://api.example/v1"}, nil},
		{[]string{"-y", "server", "--api-key", "abc", "--port", "80"}, []string{"-y", "server", "--api-key", "*", "--port", "80"}, []string{"abc"}},
		{[]string{"--token=abc", "API_KEY=def", "--url=https://u:ghi@h.example/", "keyboard=jkl"}, []string{"--token=*", "API_KEY=*", "--url=https://u:*@h.example/", "keyboard=jkl"}, []string{"abc", "def", "ghi"}},
	} {
		if got := MaskArgs(c.in, "*"); !slices.Equal(got, c.shown) {
			t.Errorf("MaskArgs(%q) = %q, want %q", c.in, got, c.shown)
		}
		e := Entry{Key: "k", Value: reflect.ValueOf(c.in), Secrecy: Carried}
		if got := e.Secrets(nil); !slices.Equal(got, c.secrets) {
			t.Errorf("secrets of %q = %q, want %q", c.in, got, c.secrets)
		}
	}
	if got := Mask("https://a:b@h.example/", "(set)"); got != "https://a:(set)@h.example/" {
		t.Errorf("Mask = %q", got)
	}
}

type server struct {
	Name    string            `yaml:"name"`
	URL     string            `yaml:"url" secret:"url"`
	Env     map[string]string `yaml:"env" secret:"true"`
	Token   string            `yaml:"token" secret:"true"`
	Allowed map[string]string `yaml:"allowed" secret:"env"`
}

type Inner struct {
	Key string `yaml:"key" secret:"true"`
}

type declared struct {
	Inner   `yaml:",inline"`
	Servers []server `yaml:"servers"`
	Part    section  `yaml:"part"`
	Skipped string   `yaml:"-" secret:"true"`
}

// Entries finds every key, inlined, nested and in lists of sections,
// with what it declares; Secrets gives each declared value, the
// variables an env map names read through getenv.
func TestEntriesAndSecrets(t *testing.T) {
	v := declared{Inner: Inner{Key: "k-value"}, Servers: []server{
		{Name: "a", URL: "https://u:pw@a.example/", Env: map[string]string{"A": "env-value"}, Token: "t-value", Allowed: map[string]string{"VAR": "host"}},
		{Name: "b"},
	}, Part: section{Secret: "not declared"}}
	var keys []string
	for _, e := range Entries("top", v) {
		keys = append(keys, e.Key+"="+[]string{"public", "whole", "carried", "env"}[e.Secrecy])
	}
	want := "top.key=whole top.servers[0].name=public top.servers[0].url=carried top.servers[0].env=whole top.servers[0].token=whole " +
		"top.servers[0].allowed=env top.servers[1].name=public top.servers[1].url=carried top.servers[1].env=whole top.servers[1].token=whole " +
		"top.servers[1].allowed=env top.part.workers=public top.part.timeout=public top.part.url=public top.part.secret=public"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("entries:\n%s\nwant\n%s", got, want)
	}
	got := Secrets(v, func(name string) string { return map[string]string{"VAR": "var-value"}[name] })
	slices.Sort(got)
	if w := []string{"env-value", "k-value", "pw", "t-value", "var-value"}; !slices.Equal(got, w) {
		t.Errorf("secrets = %q, want %q", got, w)
	}
}

// A declaration that cannot mean anything panics, naming the key.
func TestBadDeclarationsPanic(t *testing.T) {
	type unknown struct {
		A string `yaml:"a" secret:"yes"`
	}
	type onSection struct {
		S section `yaml:"s" secret:"true"`
	}
	type wrongKind struct {
		N int `yaml:"n" secret:"url"`
	}
	for _, c := range []struct {
		v   any
		key string
	}{{unknown{}, "x.a"}, {onSection{}, "x.s"}, {wrongKind{}, "x.n"}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), c.key) {
					t.Errorf("%T: recovered %v, want a panic naming %s", c.v, r, c.key)
				}
			}()
			Entries("x", c.v)
		}()
	}
}
