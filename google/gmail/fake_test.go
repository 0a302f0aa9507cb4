package gmail_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"loadout/google/gmail"
	"loadout/google/googletest"
	"loadout/tools"
)

const user = "telegram:42"

// kit is the group under test against a fake.
type kit struct {
	f      *googletest.API
	tools  map[string]tools.Tool
	group  tools.Group
	client *googletest.Client
}

func newKit(t *testing.T) *kit { return newKitSending(t, "") }

// newKitSending is newKit with google.gmail.send set to send.
func newKitSending(t *testing.T, send string) *kit {
	f := googletest.NewAPI(t)
	c := &googletest.Client{Endpoint: f.URL}
	mg := gmail.New(c, gmail.Options{Send: send, Backoff: googletest.Backoff})
	k := &kit{f: f, tools: map[string]tools.Tool{}, group: mg.Group, client: c}
	for _, tool := range mg.Tools {
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
	res, err := tool.Call(ctxAs(user), json.RawMessage(args))
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
