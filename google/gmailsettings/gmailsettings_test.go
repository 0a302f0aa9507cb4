package gmailsettings_test

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"loadout/backoff"
	"loadout/google/gmailsettings"
	"loadout/google/googletest"
	"loadout/tools"
)

type kit struct {
	api    *googletest.API
	client *googletest.Client
	group  tools.Group
	tools  map[string]tools.Tool
}

func newKit(t *testing.T) *kit {
	api := googletest.NewAPI(t)
	c := &googletest.Client{Endpoint: api.URL}
	sg := gmailsettings.New(c, gmailsettings.Options{Backoff: backoff.Policy{Attempts: 2, Initial: time.Millisecond}})
	k := &kit{api: api, client: c, group: sg.Group, tools: map[string]tools.Tool{}}
	for _, tl := range sg.Tools {
		k.tools[tl.Name] = tl
	}
	return k
}

func (k *kit) call(t *testing.T, name, args string) (map[string]any, error) {
	t.Helper()
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "slack:T1:C1", UserKey: "slack:T1:U2"})
	res, err := k.tools[name].Call(ctx, json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(res)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func (k *kit) must(t *testing.T, name, args string) map[string]any {
	t.Helper()
	m, err := k.call(t, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func code(err error) string {
	if te, ok := err.(*tools.Error); ok {
		return te.Code
	}
	return ""
}

func js(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const labelsJSON = `{"labels":[
 {"id":"INBOX","name":"INBOX","type":"system"},
 {"id":"Label_7","name":"Receipts","type":"user"},
 {"id":"Label_9","name":"Newsletters","type":"user"}]}`

func TestFilters(t *testing.T) {
	k := newKit(t)
	k.api.On("GET /gmail/v1/users/me/settings/filters", 200, `{"filter":[
	 {"id":"ANe1BmjVuGr3Vz8E0fTbXr5v","criteria":{"from":"billing@shop.example.com","hasAttachment":true},
	  "action":{"addLabelIds":["Label_7","STARRED"],"removeLabelIds":["INBOX","UNREAD"]}},
	 {"id":"ANe1BmjXq","criteria":{"query":"list:news.example.com"},"action":{"forward":"me@elsewhere.example.org"}}]}`)
	k.api.On("GET /gmail/v1/users/me/labels", 200, labelsJSON)
	out := k.must(t, "gmail_list_filters", `{}`)
	got := js(t, out["filters"])
	for _, want := range []string{`"id":"ANe1BmjVuGr3Vz8E0fTbXr5v"`, `"from":"billing@shop.example.com"`, `"has_attachment":true`,
		`"add_labels":["Receipts"]`, `"star":true`, `"archive":true`, `"mark_read":true`, `"forward":"me@elsewhere.example.org"`} {
		if !strings.Contains(got, want) {
			t.Errorf("filters lack %s: %s", want, got)
		}
	}
	if k.api.Last("GET /gmail/v1/users/me/settings/filters").User != "slack:T1:U2" {
		t.Fatal("wrong user")
	}

	k.api.On("POST /gmail/v1/users/me/settings/filters", 200, `{"id":"ANe1BmjNEW","criteria":{"from":"news@example.com"},"action":{"addLabelIds":["Label_9"],"removeLabelIds":["INBOX"]}}`)
	out = k.must(t, "gmail_create_filter", `{"from":"news@example.com","add_labels":["newsletters"],"archive":true}`)
	var body struct {
		Criteria struct{ From string }
		Action   struct{ AddLabelIds, RemoveLabelIds []string }
	}
	json.Unmarshal([]byte(k.api.Last("POST /gmail/v1/users/me/settings/filters").Body), &body)
	if body.Criteria.From != "news@example.com" || js(t, body.Action.AddLabelIds) != `["Label_9"]` || js(t, body.Action.RemoveLabelIds) != `["INBOX"]` {
		t.Fatalf("create body = %+v", body)
	}
	if out["status"] != "created" || !strings.Contains(js(t, out["filter"]), `"add_labels":["Newsletters"]`) {
		t.Fatalf("create = %v", out)
	}

	_, err := k.call(t, "gmail_create_filter", `{"from":"x@example.com","add_labels":["Nope"]}`)
	if code(err) != tools.CodeInvalidArgument || !strings.Contains(err.(*tools.Error).JSON(), "Receipts") {
		t.Fatalf("unknown label: %v", err)
	}
	if _, err := k.call(t, "gmail_create_filter", `{"archive":true}`); code(err) != tools.CodeMissingParameter {
		t.Fatalf("no criteria: %v", err)
	}
	if _, err := k.call(t, "gmail_create_filter", `{"from":"a@example.com"}`); code(err) != tools.CodeMissingParameter {
		t.Fatalf("no action: %v", err)
	}
	k.api.On("POST /gmail/v1/users/me/settings/filters", 400, `{"error":{"code":400,"message":"Filter doesn't have any criteria","status":"INVALID_ARGUMENT"}}`)
	if _, err := k.call(t, "gmail_create_filter", `{"query":"x","star":true}`); code(err) != tools.CodeInvalidArgument || !strings.Contains(err.Error(), "criteria") {
		t.Fatalf("400: %v", err)
	}

	k.api.On("DELETE /gmail/v1/users/me/settings/filters/ANe1BmjNEW", 204, ``)
	if out := k.must(t, "gmail_delete_filter", `{"filter_id":"ANe1BmjNEW"}`); out["status"] != "deleted" {
		t.Fatalf("delete = %v", out)
	}
	if _, err := k.call(t, "gmail_delete_filter", `{"filter_id":"gone"}`); code(err) != tools.CodeNotFound {
		t.Fatalf("delete missing: %v", err)
	}
}

func TestVacation(t *testing.T) {
	k := newKit(t)
	k.api.On("GET /gmail/v1/users/me/settings/vacation", 200, `{"enableAutoReply":true,"responseSubject":"Away","responseBodyPlainText":"Back on Monday.","restrictToContacts":false,"restrictToDomain":false,"startTime":"1782864000000","endTime":"1783468800000"}`)
	out := k.must(t, "gmail_get_vacation", `{}`)
	if out["enabled"] != true || out["subject"] != "Away" || out["body"] != "Back on Monday." || out["start"] != "2026-07-01T00:00:00Z" || out["end"] != "2026-07-08T00:00:00Z" {
		t.Fatalf("vacation = %v", out)
	}

	k.api.Handle("PUT /gmail/v1/users/me/settings/vacation", func(r googletest.Request) (int, string) { return 200, r.Body })
	out = k.must(t, "gmail_set_vacation", `{"enabled":true,"subject":"Out of office","body":"Back July 8.","start":"2026-07-01","end":"2026-07-08T00:00:00Z","contacts_only":true}`)
	var body map[string]any
	json.Unmarshal([]byte(k.api.Last("PUT /gmail/v1/users/me/settings/vacation").Body), &body)
	if body["enableAutoReply"] != true || body["responseBodyPlainText"] != "Back July 8." || body["startTime"] != "1782864000000" ||
		body["endTime"] != "1783468800000" || body["restrictToContacts"] != true || out["status"] != "auto-reply on" {
		t.Fatalf("set body = %v, out %v", body, out)
	}

	out = k.must(t, "gmail_set_vacation", `{"enabled":false}`)
	json.Unmarshal([]byte(k.api.Last("PUT /gmail/v1/users/me/settings/vacation").Body), &body)
	if v, ok := body["enableAutoReply"]; !ok || v != false || out["status"] != "auto-reply off" {
		t.Fatalf("turning off must send enableAutoReply=false: %v", body)
	}
	for _, args := range []string{`{"enabled":true}`, `{"enabled":true,"body":"x","start":"next week"}`, `{"enabled":true,"body":"x","start":"2026-07-08","end":"2026-07-01"}`} {
		if _, err := k.call(t, "gmail_set_vacation", args); code(err) == "" {
			t.Errorf("%s accepted", args)
		}
	}
}

const sendAsJSON = `{"sendAs":[
 {"sendAsEmail":"ana@example.com","displayName":"Ana Lima","replyToAddress":"","signature":"<div>Ana</div>","isPrimary":true,"isDefault":true},
 {"sendAsEmail":"ana@work.example.org","displayName":"Ana L.","signature":"","isDefault":false,"verificationStatus":"accepted"}]}`

func TestSignature(t *testing.T) {
	k := newKit(t)
	k.api.On("GET /gmail/v1/users/me/settings/sendAs", 200, sendAsJSON)
	out := k.must(t, "gmail_get_signature", `{}`)
	if out["send_as_email"] != "ana@example.com" || out["signature"] != "<div>Ana</div>" {
		t.Fatalf("signature = %v", out)
	}
	k.api.Handle("PATCH /gmail/v1/users/me/settings/sendAs/ana@work.example.org", func(r googletest.Request) (int, string) {
		return 200, `{"sendAsEmail":"ana@work.example.org","signature":"Ana Lima<br>Work"}`
	})
	out = k.must(t, "gmail_update_signature", `{"send_as_email":"ANA@work.example.org","signature":"Ana Lima<br>Work"}`)
	if b := k.api.Last("PATCH /gmail/v1/users/me/settings/sendAs/ana@work.example.org").Body; !strings.Contains(b, `"signature":"Ana Lima\u003cbr\u003eWork"`) {
		t.Fatalf("patch body = %s", b)
	}
	if out["status"] != "signature updated" {
		t.Fatalf("update = %v", out)
	}
	_, err := k.call(t, "gmail_get_signature", `{"send_as_email":"nobody@example.com"}`)
	if code(err) != tools.CodeNotFound || !strings.Contains(err.(*tools.Error).JSON(), "ana@work.example.org") {
		t.Fatalf("unknown address: %v", err)
	}
}

func TestForwardingAddresses(t *testing.T) {
	k := newKit(t)
	k.api.On("GET /gmail/v1/users/me/settings/forwardingAddresses", 200, `{"forwardingAddresses":[{"forwardingEmail":"me@elsewhere.example.org","verificationStatus":"accepted"},{"forwardingEmail":"new@example.net","verificationStatus":"pending"}]}`)
	out := k.must(t, "gmail_list_forwarding_addresses", `{}`)
	if got := js(t, out["forwarding_addresses"]); got != `[{"email":"me@elsewhere.example.org","status":"accepted","verified":true},{"email":"new@example.net","status":"pending","verified":false}]` {
		t.Fatalf("forwarding = %s", got)
	}
}

func TestErrorsAndNotConnected(t *testing.T) {
	k := newKit(t)
	k.api.On("GET /gmail/v1/users/me/settings/vacation", 403, `{"error":{"code":403,"message":"Insufficient Permission","errors":[{"reason":"insufficientPermissions"}],"status":"PERMISSION_DENIED"}}`)
	if _, err := k.call(t, "gmail_get_vacation", `{}`); code(err) != tools.CodePermission {
		t.Fatalf("403: %v", err)
	}
	k.api.On("GET /gmail/v1/users/me/settings/forwardingAddresses", 503, `{"error":{"code":503,"message":"Backend Error","status":"UNAVAILABLE"}}`)
	if _, err := k.call(t, "gmail_list_forwarding_addresses", `{}`); code(err) != tools.CodeUnavailable {
		t.Fatalf("503: %v", err)
	}
	if n := k.api.Count("GET /gmail/v1/users/me/settings/forwardingAddresses"); n != 2 {
		t.Fatalf("tried %d times, want 2", n)
	}
	k.client.Connected = map[string]bool{}
	before := len(k.api.Requests())
	args := map[string]string{"gmail_delete_filter": `{"filter_id":"f"}`, "gmail_create_filter": `{"from":"a@example.com","star":true}`,
		"gmail_set_vacation": `{"enabled":false}`, "gmail_update_signature": `{"signature":"s"}`}
	for name := range k.tools {
		if _, err := k.call(t, name, cmp.Or(args[name], `{}`)); code(err) != tools.CodeNotConnected {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(k.api.Requests()) != before {
		t.Fatal("a request reached Google without an account")
	}
	if k.group.Name != "google_gmail_settings" || k.group.Description == "" || len(k.tools) > 10 {
		t.Fatalf("group = %+v (%d tools)", k.group, len(k.tools))
	}
}
