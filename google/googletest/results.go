package googletest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// Backoff is the retry policy of group tests: three tries a millisecond
// apart, so a temporary error is retried (ErrorCase.Tries) without slowing
// the tests down.
var Backoff = backoff.Policy{Attempts: 3, Initial: time.Millisecond}

// Call runs one tool of a group through a registry and executor, as the
// engine does, acting for userKey.
func Call(t testing.TB, g google.Group, userKey, name, args string) tools.Result {
	t.Helper()
	reg := tools.NewRegistry()
	if err := g.Register(reg); err != nil {
		t.Fatal(err)
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: userKey, UserKey: userKey})
	return tools.NewExecutor(reg, nil).Run(ctx, reg.Catalog(true, nil, nil), []tools.Call{{ID: "c1", Name: name, Arguments: args}})[0]
}

// Decode parses a successful result as a JSON object.
func Decode(t testing.TB, r tools.Result) map[string]any {
	t.Helper()
	if r.Status != tools.StatusSuccess {
		t.Fatalf("%s: %s", r.Name, r.Content)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Content), &m); err != nil {
		t.Fatalf("result is not JSON: %v: %s", err, r.Content)
	}
	return m
}

// Body decodes a request's JSON body.
func Body(t testing.TB, r Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.Body)
	}
	return m
}

// BatchRequests decodes the requests of a batchUpdate call's body.
func BatchRequests(t testing.TB, r Request) []map[string]any {
	t.Helper()
	var b struct {
		Requests []map[string]any `json:"requests"`
	}
	if err := json.Unmarshal([]byte(r.Body), &b); err != nil {
		t.Fatalf("body is not a batch update: %v: %s", err, r.Body)
	}
	return b.Requests
}

// WantError fails the test unless r is an error with code whose content
// contains the given text.
func WantError(t testing.TB, r tools.Result, code, contains string) {
	t.Helper()
	if r.Status != tools.StatusError || r.Code != code || !strings.Contains(r.Content, contains) {
		t.Fatalf("result = %s %s, want error %s containing %q", r.Status, r.Content, code, contains)
	}
}

// Check reports a mismatch between the printed forms of got and want.
func Check(t testing.TB, what string, got, want any) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// ErrorBody is a Google API error response body.
func ErrorBody(code int, reason, msg string) string {
	return fmt.Sprintf(`{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`, code, msg, msg, reason)
}

// ErrorCase is one Google error answer and the tool error it must become
// after Tries requests.
type ErrorCase struct {
	Name   string
	Status int
	Reason string
	Code   string
	Tries  int
}

// CheckErrors answers methodPath with each case's error (message "Google
// says no.") and checks the result of call: the error code, the message,
// the number of tries, and the reconnect hint on permission errors.
func CheckErrors(t *testing.T, user, methodPath string, cases []ErrorCase, call func(t *testing.T, c *Client) tools.Result) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			f := NewStrictAPI(t, user)
			f.Handle(methodPath, func(Request) (int, string) {
				return tc.Status, ErrorBody(tc.Status, tc.Reason, "Google says no.")
			})
			r := call(t, f.Client())
			WantError(t, r, tc.Code, "Google says no.")
			Check(t, "tries", f.Count(methodPath), tc.Tries)
			if tc.Code == tools.CodePermission && !strings.Contains(r.Content, "/connect google") {
				t.Errorf("permission error lacks the reconnect hint: %s", r.Content)
			}
		})
	}
}
