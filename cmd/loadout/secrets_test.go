package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"loadout/chat/chattest"
	"loadout/config"
	"loadout/settings"
	"loadout/tools/mcp/mcptest"
)

// Credentials written inside the values of keys that are not secrets
// themselves: a URL's user-info and query, a DSN's password, an MCP
// server's arguments. None may show on the configuration page.
const (
	dsnPassword   = "hunter2-dsn-pw"
	llmURLPass    = "llm-userinfo-pw"
	fbURLPass     = "fallback-userinfo-pw"
	mcpQueryKey   = "mcp-query-api-key"
	mcpHeader     = "mcp-header-value-9f2"
	mcpArgToken   = "mcp-arg-token-77c"
	mcpArgURLPass = "mcp-arg-userinfo-pw"
	mcpEnvToken   = "mcp-env-token-4e1d"
	braveKey      = "BSA-brave-search-key-31"
)

// urlSecretsConfig is a config whose URLs, DSN and MCP servers carry
// credentials, with the console on.
func urlSecretsConfig(t *testing.T, dsn string) settings.Config {
	t.Helper()
	raw := fmt.Sprintf(`ui:
  enabled: true
  admin_token: a-long-operator-token-123
store:
  dsn: %q
llm:
  base_url: https://llmuser:%s@llm.example/v1
  fallbacks:
    - base_url: https://fbuser:%s@fallback.example/v1
web:
  brave_api_key: %s
mcp:
  servers:
    - name: hosted
      url: http://127.0.0.1:1/mcp?api_key=%s&team=blue
      headers:
        X-Api-Key: %s
    - name: local
      command: %s
      args: ["--api-key", %q, "https://u:%s@mcp.example/sse"]
      env:
        SERVICE_TOKEN: %s
`, dsn, llmURLPass, fbURLPass, braveKey, mcpQueryKey, mcpHeader, filepath.Join(t.TempDir(), "absent"), mcpArgToken, mcpArgURLPass, mcpEnvToken)
	cfg, err := settings.Parse([]byte(raw), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	return cfg
}

// The operator's /config page, through the console's own handler after
// signing in: the password of a DSN (URL or key=value), the user-info
// of llm.base_url and of a fallback's, an MCP server's URL key and its
// arguments' credentials show as set, never in clear; the rest of each
// value still shows.
func TestConfigPageShowsNoCredentialInAURL(t *testing.T) {
	for _, dsn := range []string{
		"postgres://loadout:" + dsnPassword + "@db.example:5432/loadout?sslmode=disable",
		"host=db.example user=loadout password=" + dsnPassword + " dbname=loadout",
	} {
		cfg := urlSecretsConfig(t, dsn)
		a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer a.db.Close()
		if err := a.wireUI(); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.mux)
		defer srv.Close()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"a-long-operator-token-123"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = c.Get(srv.URL + "/config")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, "llm.base_url") {
			t.Fatalf("/config: %d\n%s", resp.StatusCode, page)
		}
		for _, s := range []string{dsnPassword, llmURLPass, fbURLPass, mcpQueryKey, mcpHeader, mcpArgToken, mcpArgURLPass, mcpEnvToken, braveKey} {
			if strings.Contains(page, s) {
				t.Errorf("dsn %q: /config shows %q", dsn, s)
			}
		}
		for _, keep := range []string{"llm.example/v1", "fallback.example/v1", "db.example", "team=blue", "mcp.example/sse", "--api-key"} {
			if !strings.Contains(page, keep) {
				t.Errorf("dsn %q: /config lost %q, which is no secret", dsn, keep)
			}
		}
	}
}

// web.brave_api_key, an MCP server's header values and environment, the
// credentials in its URL and arguments, and store.dsn's password never
// reach a log line.
func TestLoggerRedactsEverySectionsSecrets(t *testing.T) {
	for _, dsn := range []string{
		"postgres://loadout:" + dsnPassword + "@db.example/loadout",
		"host=db.example password=" + dsnPassword,
		"postgres://loadout:" + url.QueryEscape(dsnPassword+"/@") + "@db.example/loadout",
	} {
		var buf chattest.LogBuffer
		log := urlSecretsConfig(t, dsn).Logger(&buf)
		log.Error("calls failed", "brave", "X-Subscription-Token: "+braveKey, "header", "sent "+mcpHeader,
			"err", fmt.Errorf("connect %s: refused", dsn), "pw", dsnPassword+"/@", "mcp", "GET http://127.0.0.1:1/mcp?api_key="+mcpQueryKey+"&team=blue",
			"args", []string{"--api-key", mcpArgToken}, "env", "SERVICE_TOKEN="+mcpEnvToken, "url", "https://u:"+mcpArgURLPass+"@mcp.example/sse")
		out := buf.String()
		for _, s := range []string{dsnPassword, url.QueryEscape(dsnPassword + "/@"), braveKey, mcpHeader, mcpQueryKey, mcpArgToken, mcpEnvToken, mcpArgURLPass} {
			if strings.Contains(out, s) {
				t.Errorf("dsn %q: the log shows %q:\n%s", dsn, s, out)
			}
		}
		for _, keep := range []string{"db.example", "team=blue", "mcp.example/sse", "calls failed"} {
			if !strings.Contains(out, keep) {
				t.Errorf("dsn %q: the log lost %q:\n%s", dsn, keep, out)
			}
		}
	}
}

// A stdio MCP server that writes the token of its environment to its
// stderr, in `loadout chat` at debug level: loadout logs what the server
// said, and the token is not in it.
func TestMCPServersStderrLogsNoToken(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := chattest.NewModelServer(t)
	extra := fmt.Sprintf("mcp:\n  servers:\n    - name: calc\n      command: %s\n      args: [\"-test.run=^$\"]\n      env:\n        %s: \"1\"\n        %s: ${MCP_TOKEN}\n",
		exe, mcptest.EnvVar, mcptest.TokenVar)
	cfgPath, _ := writeConfig(t, model.URL, extra)
	out, err := runCLIEnv(t, "/status\n", map[string]string{"MCP_TOKEN": mcpEnvToken, "LOADOUT_LOG_LEVEL": "debug"}, "-config", cfgPath, "chat")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "MCP server says") || !strings.Contains(out, "signed in with token") {
		t.Fatalf("the server's stderr was not logged:\n%s", out)
	}
	if strings.Contains(out, mcpEnvToken) {
		t.Fatalf("the server's token reached the log:\n%s", out)
	}
}

// What a key's name says it holds: a credential; a URL or DSN, which may
// carry one; or, for a map, what it hands to another program (its
// environment, its headers), every value of which is a secret.
var (
	credentialKey = regexp.MustCompile(`token|secret|passw|api_?key|(^|_)key$`)
	urlKey        = regexp.MustCompile(`(^|_)(url|endpoint|dsn)$`)
	handedOnKey   = regexp.MustCompile(`^(env|environment|headers?)$`)
)

// undeclared are the keys of entries (strings, lists, maps) whose names
// say they hold a secret and that declare none, each with what it
// should declare.
func undeclared(entries []config.Entry) []string {
	var out []string
	for _, e := range entries {
		name := e.Key[strings.LastIndex(e.Key, ".")+1:]
		if k := e.Value.Kind(); k != reflect.String && k != reflect.Slice && k != reflect.Map {
			continue // a number of tokens is no token
		}
		switch {
		case handedOnKey.MatchString(name) && e.Secrecy != config.Whole:
			out = append(out, e.Key+`: hands its values to another program: secret:"true"`)
		case credentialKey.MatchString(name) && e.Secrecy == config.Public:
			out = append(out, e.Key+`: named like a credential: secret:"true" (or "url", "env")`)
		case urlKey.MatchString(name) && e.Secrecy == config.Public:
			out = append(out, e.Key+`: a URL or DSN may carry credentials: secret:"url"`)
		}
	}
	return out
}

// filler gives every string of a configuration a value of its own, a
// URL that carries a password and a key, so that what a key declares
// can be told apart in a log line or on a page.
type filler struct{ n int }

func (f *filler) next() string {
	f.n++
	return fmt.Sprintf("https://user:passw0rd%03dx@host%03d.example/p?api_key=qkey%03dxyz&n=%d", f.n, f.n, f.n, f.n)
}

// fill fills v: its strings, lists (one item; arguments with a
// credential flag) and maps (one entry, named like an environment
// variable), and every key of its sections.
func (f *filler) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.next())
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if sf.IsExported() && name != "-" && (name != "" || opts == "inline") {
				f.fill(v.Field(i))
			}
		}
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		f.fill(e)
		items := []reflect.Value{e}
		if e.Kind() == reflect.String {
			items = []reflect.Value{reflect.ValueOf("--token"), reflect.ValueOf(fmt.Sprintf("argtok%03dxyz", f.n)), e}
		}
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, len(items)), items...))
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		e := reflect.New(v.Type().Elem()).Elem()
		f.fill(e)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(reflect.ValueOf(fmt.Sprintf("LOADOUT_TEST_SECRET_%03d", f.n)), e)
	}
}

// filledConfig is a settings.Config, every channel's section included, filled.
func filledConfig(t *testing.T) settings.Config {
	t.Helper()
	cfg, err := settings.Parse(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	var f filler
	f.fill(reflect.ValueOf(&cfg).Elem())
	for _, k := range settings.ChannelKinds() {
		s := reflect.New(k.ConfigType()).Elem()
		f.fill(s)
		cfg.Channels[k.Name()] = s.Interface()
	}
	return cfg
}

// The whole configuration, every section and every channel's, walked by
// reflection: a key named like a credential, a URL or a DSN, and a map
// that hands an environment or headers to another program, must declare
// its secret, or this fails naming the key. Then everything declared is
// kept out of the log and the console's page: a secret key's value, the
// password and key a URL carries, the token after a credential flag, a
// map's values and the variables tools.custom_secrets names.
func TestEveryCredentialOfTheConfigIsDeclared(t *testing.T) {
	cfg := filledConfig(t)
	for _, miss := range undeclared(cfg.Entries()) {
		t.Error(miss)
	}
	// What fill wrote inside a URL or after a credential flag.
	carried := regexp.MustCompile(`passw0rd\d+x|qkey\d+xyz|argtok\d+xyz`)
	var secrets, lines []string
	for _, e := range cfg.Entries() {
		switch e.Secrecy {
		case config.Whole:
			secrets = append(secrets, valuesOf(e.Value)...)
		case config.Carried:
			for _, v := range valuesOf(e.Value) {
				secrets = append(secrets, carried.FindAllString(v, -1)...)
			}
		case config.EnvNamed:
			for _, k := range e.Value.MapKeys() {
				v := "envvalue-of-" + k.String()
				t.Setenv(k.String(), v)
				secrets, lines = append(secrets, v), append(lines, v)
			}
		}
		lines = append(lines, valuesOf(e.Value)...)
	}
	if len(secrets) < 50 {
		t.Fatalf("only %d secrets declared: %q", len(secrets), secrets)
	}
	var buf chattest.LogBuffer
	log := cfg.Logger(&buf)
	for _, l := range lines {
		log.Error("calling "+l+" failed", "value", l)
	}
	var page strings.Builder
	for _, s := range cfg.Settings() {
		fmt.Fprintf(&page, "%s=%s\n", s.Key, s.Value)
	}
	for _, s := range secrets {
		if strings.Contains(buf.String(), s) {
			t.Errorf("the log shows the declared secret %q", s)
		}
		if strings.Contains(page.String(), s) {
			t.Errorf("the configuration page shows the declared secret %q", s)
		}
	}
	if !strings.Contains(page.String(), "llm.base_url=https://user:(set)@host") || !strings.Contains(page.String(), "agent.name=https://user:passw0rd") {
		t.Errorf("the page does not show what is no secret:\n%s", page.String())
	}
}

// valuesOf are the strings of v: itself, a list's items, a map's values.
func valuesOf(v reflect.Value) []string {
	switch v.Kind() {
	case reflect.String:
		return []string{v.String()}
	case reflect.Slice, reflect.Array:
		var out []string
		for i := range v.Len() {
			out = append(out, valuesOf(v.Index(i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range v.MapKeys() {
			out = append(out, valuesOf(v.MapIndex(k))...)
		}
		return out
	}
	return nil
}

// A section added with a credential, a URL and an environment it does
// not declare fails the walk, which names each key.
func TestAnUndeclaredCredentialIsNamed(t *testing.T) {
	type leaky struct {
		settings.Config `yaml:",inline"`
		Extra           struct {
			Name     string            `yaml:"name"`
			APIToken string            `yaml:"api_token"`
			HookURL  string            `yaml:"hook_url"`
			Env      map[string]string `yaml:"env"`
		} `yaml:"extra"`
	}
	var v leaky
	var f filler
	f.fill(reflect.ValueOf(&v).Elem())
	var keys []string
	for _, miss := range undeclared(config.Entries("", v)) {
		keys = append(keys, miss[:strings.Index(miss, ":")])
	}
	if want := []string{"extra.api_token", "extra.hook_url", "extra.env"}; !slices.Equal(keys, want) {
		t.Fatalf("undeclared: %q, want %q", keys, want)
	}
}
