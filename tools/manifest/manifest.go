// Package manifest loads operator-defined tool groups from JSON files: each
// file in a directory is one group, named after the file, whose tools call
// HTTP endpoints. A file may start with a "_meta" entry giving the group's
// display name and description; without one they are derived from the file
// name and the tool names.
//
// Example (weather.json):
//
//	[
//	  {"_meta": true, "display_name": "Weather", "description": "Current weather and forecasts"},
//	  {"name": "weather_now", "description": "Current weather for a city",
//	   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
//	   "http": {"method": "POST", "url": "http://127.0.0.1:9000/now"}}
//	]
package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"loadout/tools"
)

// MaxResult caps the bytes of an endpoint's answer passed to the model.
const MaxResult = 16 * 1024

// Loaded is one file's group and tools.
type Loaded struct {
	Group tools.Group
	Tools []tools.Tool
	File  string
}

type entry struct {
	Meta        bool            `json:"_meta"`
	DisplayName string          `json:"display_name"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	ReadOnly    bool            `json:"read_only"`
	Effect      string          `json:"effect"`
	Timeout     string          `json:"timeout"`
	HTTP        *struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	} `json:"http"`
}

// LoadDir loads every *.json file in dir, in name order. client defaults
// to a client with no overall timeout (each tool has its own).
func LoadDir(dir string, client *http.Client) ([]Loaded, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Loaded
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", f, err)
		}
		l, err := Parse(raw, strings.TrimSuffix(filepath.Base(f), ".json"), client)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", f, err)
		}
		l.File = f
		out = append(out, l)
	}
	return out, nil
}

// Secrets gives the value of a variable a tool's header names, for a
// request to host, or an error the model gets instead (a variable the
// tool may not send, or not to that host).
type Secrets func(name, host string) (string, error)

// environment is the Secrets of the operator's own manifests: any
// variable of the process's environment, to the tool's host.
func environment(name, _ string) (string, error) { return os.Getenv(name), nil }

// Parse reads one manifest of the operator's. group is the group name
// (the file's base name). The _meta entry, if present, is not a tool.
// Its headers may send any environment variable.
func Parse(raw []byte, group string, client *http.Client) (Loaded, error) {
	return ParseWith(raw, group, client, environment)
}

// ParseWith is Parse with the tools' headers given only what secrets
// allows: tools made from a chat (tools/custom).
func ParseWith(raw []byte, group string, client *http.Client, secrets Secrets) (Loaded, error) {
	if client == nil {
		client = &http.Client{}
	}
	if client.CheckRedirect == nil {
		c := *client
		c.CheckRedirect = sameHost
		client = &c
	}
	var entries []entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return Loaded{}, fmt.Errorf("not a JSON array of tool entries: %w", err)
	}
	l := Loaded{Group: tools.Group{Name: group}}
	var names []string
	for i, e := range entries {
		if e.Meta {
			l.Group.DisplayName, l.Group.Description = e.DisplayName, e.Description
			continue
		}
		t, err := httpTool(e, client, secrets)
		if err != nil {
			return Loaded{}, fmt.Errorf("entry %d (%q): %w", i, e.Name, err)
		}
		l.Tools = append(l.Tools, t)
		names = append(names, e.Name)
	}
	if l.Group.DisplayName == "" {
		l.Group.DisplayName = displayName(group)
	}
	if l.Group.Description == "" {
		l.Group.Description = "Tools: " + strings.Join(names, ", ")
	}
	return l, nil
}

// parseEffect reads a manifest's "effect": "read-only", "mutating" or
// "destructive" (sends to other people, deletes, shares, spends money).
// Without one, a read_only tool is read-only and any other mutating.
func parseEffect(s string, readOnly bool) (tools.Effect, error) {
	switch s {
	case "":
		if readOnly {
			return tools.EffectRead, nil
		}
		return tools.EffectMutate, nil
	case "read-only":
		return tools.EffectRead, nil
	case "mutating":
		return tools.EffectMutate, nil
	case "destructive":
		return tools.EffectDestructive, nil
	}
	return 0, fmt.Errorf("effect must be read-only, mutating or destructive, got %q", s)
}

// displayName turns "my_tools" into "My Tools".
func displayName(file string) string {
	words := strings.FieldsFunc(file, func(r rune) bool { return r == '_' || r == '-' || r == ' ' })
	for i, w := range words {
		r, n := utf8.DecodeRuneInString(w)
		words[i] = strings.ToUpper(string(r)) + w[n:]
	}
	return strings.Join(words, " ")
}

func httpTool(e entry, client *http.Client, secrets Secrets) (tools.Tool, error) {
	if e.Name == "" || e.Description == "" {
		return tools.Tool{}, fmt.Errorf("name and description are required")
	}
	if e.HTTP == nil || e.HTTP.URL == "" {
		return tools.Tool{}, fmt.Errorf("http.url is required")
	}
	u, err := url.Parse(e.HTTP.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return tools.Tool{}, fmt.Errorf("http.url must be an http(s) URL")
	}
	method := strings.ToUpper(e.HTTP.Method)
	if method == "" {
		method = http.MethodPost
	}
	if method != http.MethodGet && method != http.MethodPost {
		return tools.Tool{}, fmt.Errorf("http.method must be GET or POST")
	}
	effect, err := parseEffect(e.Effect, e.ReadOnly)
	if err != nil {
		return tools.Tool{}, err
	}
	var timeout time.Duration
	if e.Timeout != "" {
		if timeout, err = time.ParseDuration(e.Timeout); err != nil {
			return tools.Tool{}, fmt.Errorf("timeout: %w", err)
		}
	}
	params, err := closeSchema(e.Parameters)
	if err != nil {
		return tools.Tool{}, fmt.Errorf("parameters: %w", err)
	}
	slots, err := placeholders(u.Path, params)
	if err != nil {
		return tools.Tool{}, fmt.Errorf("http.url: %w", err)
	}
	target, headers := e.HTTP.URL, e.HTTP.Headers
	// What a service answers is not the person's words.
	return tools.Raw(tools.Definition{
		Name: e.Name, Description: e.Description, Parameters: params,
		ReadOnly: e.ReadOnly, Effect: effect, Timeout: timeout, Untrusted: true,
		// Its arguments are read as any open tool's (tools.ReachOfJSON);
		// the service it calls is the host of its URL as filled.
		Reaches: func(_ context.Context, in any) tools.Reach {
			args, _ := in.(json.RawMessage)
			filled, _, err := fill(target, slots, args)
			if err != nil {
				return tools.UnknownReach("the service's address could not be filled in")
			}
			u, err := url.Parse(filled)
			if err != nil || u.Hostname() == "" {
				return tools.UnknownReach("the service's address names no host")
			}
			return tools.Reach{Hosts: []string{tools.NormalHost(u.Hostname())}}
		},
	}, func(ctx context.Context, args json.RawMessage) (any, error) {
		filled, rest, err := fill(target, slots, args)
		if err != nil {
			return nil, err
		}
		return call(ctx, client, method, filled, headers, secrets, rest)
	}), nil
}

// closeSchema is the manifest's parameter schema with undeclared
// arguments refused, unless the manifest sets additionalProperties
// itself.
func closeSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`), nil
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema object: %w", err)
	}
	if _, set := s["additionalProperties"]; !set {
		s["additionalProperties"] = false
	}
	return json.Marshal(s)
}

// sameHost follows a redirect only within the host the operator named,
// and never from https to http: a tool's answer may not send its
// request, with the operator's headers, anywhere else, nor in clear.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return fmt.Errorf("more than 5 redirects")
	}
	if !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
		return http.ErrUseLastResponse
	}
	if req.URL.Scheme != "https" && slices.ContainsFunc(via, func(r *http.Request) bool { return r.URL.Scheme == "https" }) {
		return http.ErrUseLastResponse
	}
	return nil
}

// placeholder is a {name} in a URL's path, filled from the argument of
// that name.
var placeholder = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{([a-zA-Z_][a-zA-Z0-9_]*)\}`) })

// placeholders lists the {name}s in a URL path; each must be a declared,
// required parameter, so a call always fills it.
func placeholders(path string, schema json.RawMessage) ([]string, error) {
	var s struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	json.Unmarshal(schema, &s) // closeSchema has checked it
	var out []string
	for _, m := range placeholder().FindAllStringSubmatch(path, -1) {
		if _, ok := s.Properties[m[1]]; !ok || !slices.Contains(s.Required, m[1]) {
			return nil, fmt.Errorf("{%s} must be a required parameter", m[1])
		}
		out = append(out, m[1])
	}
	return out, nil
}

// fill puts the arguments named by slots into the URL's path, escaped so
// that a value stays one segment of it, and returns the other arguments.
// Only the {name} parts of the URL can change.
func fill(target string, slots []string, args json.RawMessage) (string, json.RawMessage, error) {
	if len(slots) == 0 {
		return target, args, nil
	}
	m, err := objectOf(args)
	if err != nil {
		return "", nil, err
	}
	for _, k := range slots {
		v := fmt.Sprint(m[k])
		if s, ok := m[k].(string); ok {
			v = s
		}
		if v == "" || v == "." || v == ".." {
			return "", nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' cannot be %q.", k, v)}
		}
		target = strings.ReplaceAll(target, "{"+k+"}", url.PathEscape(v))
		delete(m, k)
	}
	rest, err := json.Marshal(m)
	return target, rest, err
}

// objectOf reads checked arguments as an object whose numbers keep the
// exact text the model wrote.
func objectOf(args json.RawMessage) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	err := dec.Decode(&m)
	return m, err
}

func call(ctx context.Context, client *http.Client, method, target string, headers map[string]string, secrets Secrets, args json.RawMessage) (any, error) {
	var body io.Reader
	if method == http.MethodGet {
		m, _ := objectOf(args) // checked against the schema already
		u, _ := url.Parse(target)
		q := u.Query()
		for k := range m {
			// The URL's own parameters are the operator's: an argument
			// may add to them, never replace one.
			if q.Has(k) {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument,
					Message:    fmt.Sprintf("'%s' is fixed by the tool's configuration and cannot be set.", k),
					Suggestion: fmt.Sprintf("Call the tool again without '%s'.", k)}
			}
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				q.Set(k, s)
			} else {
				b, _ := json.Marshal(v)
				q.Set(k, string(b))
			}
		}
		u.RawQuery = q.Encode()
		target = u.String()
	} else {
		body = bytes.NewReader(args)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// The secrets sent, by value, so no answer or error shows them.
	sent := map[string]string{}
	for k, v := range headers {
		var refused error
		val := os.Expand(v, func(name string) string {
			s, err := secrets(name, req.URL.Hostname())
			if err != nil && refused == nil {
				refused = err
			}
			if len(s) > maxSecret && refused == nil {
				refused = fmt.Errorf("manifest: the variable %s is longer than %d bytes", name, maxSecret)
			}
			if len(s) >= minSecret {
				sent[s] = name
			}
			return s
		})
		if refused != nil {
			return nil, refused
		}
		req.Header.Set(k, val)
	}
	v, err := send(client, req, sent)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// minSecret is the shortest value hidden from answers: a shorter one
// would blot out ordinary text (and is no secret).
const minSecret = 4

// maxSecret is the longest value sent from the environment; a longer one
// is refused.
const maxSecret = 4096

// hide replaces each secret value in s with the variable's name.
func hide(s string, sent map[string]string) string {
	for v, name := range sent {
		s = strings.ReplaceAll(s, v, "[the value of "+name+"]")
	}
	return s
}

// send runs req and reads its answer for the model, with the secrets
// sent hidden from it.
func send(client *http.Client, req *http.Request, sent map[string]string) (string, error) {
	ctx := req.Context()
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &tools.Error{Code: tools.CodeUnavailable, Message: "The tool's service could not be reached.",
			Suggestion: "Tell the person the service is down; try again later."}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return "", &tools.Error{Code: tools.CodeUnavailable,
			Message:    "The tool's service redirected the call to another host, or from https to http, which is not followed.",
			Suggestion: "Tell the person the tool needs its configuration checked."}
	}
	// Read past the cut by a secret's length at most, so a secret that
	// straddles the cut is hidden whole before the answer is cut.
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResult+maxSecret))
	if err != nil {
		return "", &tools.Error{Code: tools.CodeUnavailable, Message: "The tool's service broke off its answer."}
	}
	text := hide(string(data), sent)
	if len(text) > MaxResult {
		text = strings.ToValidUTF8(text[:MaxResult], "") + "\n[… answer cut at 16 KB]"
	}
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return "", &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("The tool's service failed (%d): %s", resp.StatusCode, text)}
	case resp.StatusCode >= 400:
		return "", &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("The tool's service rejected the call (%d): %s", resp.StatusCode, text),
			Suggestion: "Fix the arguments the service complained about."}
	}
	return text, nil
}

// Register adds a group for each manifest of dir (tools.manifests_dir);
// "" adds none. Errors name the key and the file.
func Register(reg *tools.Registry, dir string) error {
	if dir == "" {
		return nil
	}
	loaded, err := LoadDir(dir, nil)
	if err != nil {
		return fmt.Errorf("tools.manifests_dir: %w", err)
	}
	for _, l := range loaded {
		if err := reg.AddGroup(l.Group, l.Tools...); err != nil {
			return fmt.Errorf("tools.manifests_dir: %s: %w", l.File, err)
		}
	}
	return nil
}
