package gmail_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"testing"

	"loadout/google/googletest"
	"loadout/tools"
	"loadout/tools/pdf/pdftest"
)

const listJSON = `{
  "messages": [
    {"id": "18c2a1f0b2d3e4f5", "threadId": "18c2a1f0b2d3e4f5"},
    {"id": "18c29e7d6c5b4a39", "threadId": "18c29d0000000001"}
  ],
  "nextPageToken": "09876543210987654321",
  "resultSizeEstimate": 201
}`

func metaJSON(id, thread, from, subject, snippet string, labels ...string) string {
	l, _ := json.Marshal(labels)
	return `{
  "id": "` + id + `", "threadId": "` + thread + `", "labelIds": ` + string(l) + `,
  "snippet": "` + snippet + `", "sizeEstimate": 5120, "historyId": "912345", "internalDate": "1767261600000",
  "payload": {"mimeType": "multipart/alternative", "headers": [
    {"name": "From", "value": "` + from + `"},
    {"name": "To", "value": "Ana Lima <ana@example.com>"},
    {"name": "Subject", "value": "` + subject + `"},
    {"name": "Date", "value": "Thu, 1 Jan 2026 10:00:00 +0000"}
  ]}
}`
}

func TestSearch(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/messages", 200, listJSON)
	k.f.On("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5", 200,
		metaJSON("18c2a1f0b2d3e4f5", "18c2a1f0b2d3e4f5", "Bob Ng <bob@example.com>", "Invoice 42", "Please find attached the invoice for March &amp; April", "INBOX", "UNREAD", "CATEGORY_UPDATES"))
	k.f.On("GET /gmail/v1/users/me/messages/18c29e7d6c5b4a39", 200,
		metaJSON("18c29e7d6c5b4a39", "18c29d0000000001", "Carla <carla@example.org>", "Re: Lunch", "Sounds good", "INBOX"))

	out := k.mustCall(t, "gmail_search", `{"query":"from:bob is:unread","max_results":5}`)

	list := k.f.Last("GET /gmail/v1/users/me/messages")
	if list.Query.Get("q") != "from:bob is:unread" || list.Query.Get("maxResults") != "5" || list.User != user {
		t.Fatalf("list request = %+v", list)
	}
	get := k.f.Last("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5")
	if get.Query.Get("format") != "metadata" || !slices.Equal(get.Query["metadataHeaders"], []string{"From", "To", "Subject", "Date"}) {
		t.Fatalf("get request = %+v", get.Query)
	}
	msgs := out["messages"].([]any)
	if len(msgs) != 2 || out["next_page_token"] != "09876543210987654321" || out["result_size_estimate"].(float64) != 201 {
		t.Fatalf("out = %v", out)
	}
	first := msgs[0].(map[string]any)
	if first["id"] != "18c2a1f0b2d3e4f5" || first["from"] != "Bob Ng <bob@example.com>" || first["subject"] != "Invoice 42" ||
		first["unread"] != true || first["date"] != "2026-01-01T10:00:00Z" ||
		first["snippet"] != "Please find attached the invoice for March & April" ||
		first["link"] != "https://mail.google.com/mail/u/0/#all/18c2a1f0b2d3e4f5" {
		t.Fatalf("first = %v", first)
	}
	if msgs[1].(map[string]any)["thread_id"] != "18c29d0000000001" {
		t.Fatalf("second = %v", msgs[1])
	}
}

func TestSearchDefaultsAndPaging(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/messages", 200, `{"resultSizeEstimate": 0}`)
	out := k.mustCall(t, "gmail_search", `{"page_token":"abc"}`)
	r := k.f.Last("GET /gmail/v1/users/me/messages")
	if r.Query.Get("q") != "in:inbox" || r.Query.Get("maxResults") != "10" || r.Query.Get("pageToken") != "abc" {
		t.Fatalf("query = %v", r.Query)
	}
	if toJSON(t, out["messages"]) != "[]" {
		t.Fatalf("out = %v", out)
	}
	if _, err := k.call(t, "gmail_search", `{"max_results":500}`); errCode(err) != tools.CodeInvalidArgument {
		t.Fatalf("max_results 500: %v", err)
	}
}

func TestRead(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5", 200, `{
  "id": "18c2a1f0b2d3e4f5", "threadId": "18c2a1f0b2d3e4f5", "labelIds": ["INBOX", "UNREAD"],
  "snippet": "Hi Ana", "internalDate": "1767261600000",
  "payload": {
    "partId": "", "mimeType": "multipart/mixed", "filename": "",
    "headers": [
      {"name": "From", "value": "Bob Ng <bob@example.com>"},
      {"name": "To", "value": "ana@example.com"},
      {"name": "Cc", "value": "carla@example.org"},
      {"name": "Subject", "value": "Invoice 42"},
      {"name": "Date", "value": "Thu, 1 Jan 2026 10:00:00 +0000"}
    ],
    "body": {"size": 0},
    "parts": [
      {"partId": "0", "mimeType": "multipart/alternative", "filename": "", "headers": [], "body": {"size": 0}, "parts": [
        {"partId": "0.0", "mimeType": "text/plain", "filename": "", "body": {"size": 30, "data": "`+b64("Hi Ana,\r\n\r\nThe invoice is attached.\r\n")+`"}},
        {"partId": "0.1", "mimeType": "text/html", "filename": "", "body": {"size": 60, "data": "`+b64("<p>Hi Ana,</p><p>The invoice is <b>attached</b>.</p>")+`"}}
      ]},
      {"partId": "1", "mimeType": "application/pdf", "filename": "invoice-42.pdf",
       "headers": [{"name": "Content-Type", "value": "application/pdf; name=\"invoice-42.pdf\""}],
       "body": {"attachmentId": "ANGjdJ8abc", "size": 48213}}
    ]
  }
}`)
	out := k.mustCall(t, "gmail_read", `{"message_id":"18c2a1f0b2d3e4f5"}`)
	if k.f.Last("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5").Query.Get("format") != "full" {
		t.Fatal("not format=full")
	}
	if out["body"] != "Hi Ana,\n\nThe invoice is attached." || out["cc"] != "carla@example.org" || out["subject"] != "Invoice 42" {
		t.Fatalf("out = %v", out)
	}
	atts := out["attachments"].([]any)
	a := atts[0].(map[string]any)
	if len(atts) != 1 || a["filename"] != "invoice-42.pdf" || a["mime_type"] != "application/pdf" || a["size"].(float64) != 48213 || a["attachment_id"] != "ANGjdJ8abc" {
		t.Fatalf("attachments = %v", atts)
	}
}

func TestReadHTMLOnly(t *testing.T) {
	k := newKit(t)
	html := `<html><head><style>p{color:red}</style><title>x</title></head><body>
<h1>Your order</h1><p>Thanks&nbsp;for   ordering &amp; paying.</p><ul><li>Tea</li><li>Cups</li></ul>
<p>Track it <a href="https://shop.example.com/track/1">here</a>.<br>Bye</p><script>alert(1)</script></body></html>`
	k.f.On("GET /gmail/v1/users/me/messages/m1", 200, `{"id":"m1","threadId":"t1","payload":{"mimeType":"text/html","headers":[{"name":"Subject","value":"Order"}],"body":{"size":10,"data":"`+strings.TrimRight(b64(html), "=")+`"}}}`)
	out := k.mustCall(t, "gmail_read", `{"message_id":"m1"}`)
	want := "Your order\n\nThanks for ordering & paying.\n\n- Tea\n- Cups\n\nTrack it here (https://shop.example.com/track/1).\nBye"
	if out["body"] != want {
		t.Fatalf("body = %q\nwant %q", out["body"], want)
	}
}

// sentMIME decodes the raw message of the last send request.
func sentMIME(t *testing.T, body string) (*mail.Message, string, map[string]any) {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.URLEncoding.DecodeString(req["raw"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\r\n\r\n") {
		t.Fatalf("no CRLF header end: %q", raw)
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
		t.Fatalf("headers = %v", msg.Header)
	}
	text, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	return msg, string(text), req
}

func TestSendMIME(t *testing.T) {
	k := newKit(t)
	k.f.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"18c3000000000001","threadId":"18c3000000000001","labelIds":["SENT"]}`)
	out := k.mustCall(t, "gmail_send", `{"to":"José Müller <jose@example.com>, bob@example.com","cc":"Carla <carla@example.org>","bcc":"boss@example.com","subject":"Café meeting – Grüße","body":"Hi José,\nSee you at 10 — ok?\nAna"}`)
	if out["status"] != "sent" || out["id"] != "18c3000000000001" {
		t.Fatalf("out = %v", out)
	}
	r := k.f.Last("POST /gmail/v1/users/me/messages/send")
	msg, text, _ := sentMIME(t, r.Body)
	to, err := msg.Header.AddressList("To")
	if err != nil || len(to) != 2 || to[0].Name != "José Müller" || to[0].Address != "jose@example.com" {
		t.Fatalf("To = %v, %v (%q)", to, err, msg.Header.Get("To"))
	}
	if !strings.Contains(msg.Header.Get("To"), "=?utf-8?") {
		t.Fatalf("non-ASCII name not RFC 2047 encoded: %q", msg.Header.Get("To"))
	}
	if msg.Header.Get("Bcc") != "<boss@example.com>" || msg.Header.Get("Cc") != `"Carla" <carla@example.org>` {
		t.Fatalf("Cc/Bcc = %q %q", msg.Header.Get("Cc"), msg.Header.Get("Bcc"))
	}
	rawSubject := msg.Header.Get("Subject")
	subject, err := new(mime.WordDecoder).DecodeHeader(rawSubject)
	if err != nil || subject != "Café meeting – Grüße" || !strings.HasPrefix(rawSubject, "=?utf-8?q?") {
		t.Fatalf("Subject = %q (%q), %v", subject, rawSubject, err)
	}
	if ct := msg.Header.Get("Content-Type"); ct != `text/plain; charset="UTF-8"` || msg.Header.Get("MIME-Version") != "1.0" {
		t.Fatalf("Content-Type = %q", ct)
	}
	if text != "Hi José,\r\nSee you at 10 — ok?\r\nAna" {
		t.Fatalf("body = %q", text)
	}
	if msg.Header.Get("In-Reply-To") != "" {
		t.Fatal("new mail has In-Reply-To")
	}
}

func TestSendRejectsBadAddressesAndHeaderInjection(t *testing.T) {
	k := newKit(t)
	k.f.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"x","threadId":"x"}`)
	if _, err := k.call(t, "gmail_send", `{"to":"not an address","subject":"s","body":"b"}`); errCode(err) != tools.CodeInvalidArgument || !strings.Contains(err.Error(), "not an address") {
		t.Fatalf("bad address: %v", err)
	}
	if _, err := k.call(t, "gmail_send", `{"to":"","subject":"s","body":"b"}`); errCode(err) != tools.CodeMissingParameter {
		t.Fatalf("no recipient: %v", err)
	}
	if n := k.f.Count("POST /gmail/v1/users/me/messages/send"); n != 0 {
		t.Fatalf("sent %d", n)
	}
	k.mustCall(t, "gmail_send", `{"to":"a@example.com","subject":"hi\r\nBcc: evil@example.com","body":"b"}`)
	msg, _, _ := sentMIME(t, k.f.Last("POST /gmail/v1/users/me/messages/send").Body)
	if msg.Header.Get("Bcc") != "" || msg.Header.Get("Subject") != "hi Bcc: evil@example.com" {
		t.Fatalf("header injection: %v", msg.Header)
	}
}

const origJSON = `{
  "id": "18c2a1f0b2d3e4f5", "threadId": "18c2a1f0b2d30000", "labelIds": ["INBOX"],
  "payload": {"mimeType": "text/plain", "headers": [
    {"name": "From", "value": "Bob Ng <bob@example.com>"},
    {"name": "To", "value": "Ana Lima <ana@example.com>, dan@example.com"},
    {"name": "Cc", "value": "carla@example.org"},
    {"name": "Subject", "value": "Invoice 42"},
    {"name": "Message-ID", "value": "<CAB123@mail.example.com>"},
    {"name": "References", "value": "<CAA000@mail.example.com>"}
  ]}
}`

func TestReplyThreads(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5", 200, origJSON)
	k.f.On("GET /gmail/v1/users/me/profile", 200, `{"emailAddress":"ana@example.com","messagesTotal":1200,"threadsTotal":900,"historyId":"912345"}`)
	k.f.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"18c3000000000002","threadId":"18c2a1f0b2d30000","labelIds":["SENT"]}`)

	out := k.mustCall(t, "gmail_reply", `{"message_id":"18c2a1f0b2d3e4f5","body":"Paid, thanks!"}`)
	if out["thread_id"] != "18c2a1f0b2d30000" {
		t.Fatalf("out = %v", out)
	}
	get := k.f.Last("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5")
	if !slices.Contains(get.Query["metadataHeaders"], "Message-ID") {
		t.Fatalf("reply did not ask for Message-ID: %v", get.Query)
	}
	msg, text, req := sentMIME(t, k.f.Last("POST /gmail/v1/users/me/messages/send").Body)
	if req["threadId"] != "18c2a1f0b2d30000" {
		t.Fatalf("threadId = %v", req["threadId"])
	}
	if msg.Header.Get("In-Reply-To") != "<CAB123@mail.example.com>" ||
		msg.Header.Get("References") != "<CAA000@mail.example.com> <CAB123@mail.example.com>" ||
		msg.Header.Get("Subject") != "Re: Invoice 42" || msg.Header.Get("To") != `"Bob Ng" <bob@example.com>` ||
		msg.Header.Get("Cc") != "" || text != "Paid, thanks!" {
		t.Fatalf("reply headers = %v body %q", msg.Header, text)
	}
	if k.f.Count("GET /gmail/v1/users/me/profile") != 0 {
		t.Fatal("plain reply fetched the profile")
	}

	k.mustCall(t, "gmail_reply", `{"message_id":"18c2a1f0b2d3e4f5","body":"All: paid.","reply_all":true}`)
	msg, _, _ = sentMIME(t, k.f.Last("POST /gmail/v1/users/me/messages/send").Body)
	cc, _ := msg.Header.AddressList("Cc")
	var got []string
	for _, a := range cc {
		got = append(got, a.Address)
	}
	if !slices.Equal(got, []string{"dan@example.com", "carla@example.org"}) {
		t.Fatalf("reply-all Cc = %v (own address must be left out)", got)
	}
}

func TestDrafts(t *testing.T) {
	k := newKit(t)
	k.f.On("POST /gmail/v1/users/me/drafts", 200, `{"id":"r-5124388118931112112","message":{"id":"18c3000000000003","threadId":"18c2a1f0b2d30000","labelIds":["DRAFT"]}}`)
	k.f.On("POST /gmail/v1/users/me/drafts/send", 200, `{"id":"18c3000000000004","threadId":"18c2a1f0b2d30000","labelIds":["SENT"]}`)
	k.f.On("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5", 200, origJSON)

	out := k.mustCall(t, "gmail_create_draft", `{"to":"bob@example.com","subject":"Plan","body":"Draft text"}`)
	if out["draft_id"] != "r-5124388118931112112" || out["message_id"] != "18c3000000000003" {
		t.Fatalf("out = %v", out)
	}
	var req struct {
		Message struct{ Raw, ThreadId string } `json:"message"`
	}
	json.Unmarshal([]byte(k.f.Last("POST /gmail/v1/users/me/drafts").Body), &req)
	raw, _ := base64.URLEncoding.DecodeString(req.Message.Raw)
	if !contains(string(raw), "To: <bob@example.com>\r\n", "Subject: Plan\r\n", "Draft text") || req.Message.ThreadId != "" {
		t.Fatalf("draft = %q thread %q", raw, req.Message.ThreadId)
	}

	k.mustCall(t, "gmail_create_draft", `{"reply_to_message_id":"18c2a1f0b2d3e4f5","body":"Reply draft"}`)
	json.Unmarshal([]byte(k.f.Last("POST /gmail/v1/users/me/drafts").Body), &req)
	raw, _ = base64.URLEncoding.DecodeString(req.Message.Raw)
	if req.Message.ThreadId != "18c2a1f0b2d30000" || !contains(string(raw), "In-Reply-To: <CAB123@mail.example.com>", "Subject: Re: Invoice 42") {
		t.Fatalf("reply draft = %q thread %q", raw, req.Message.ThreadId)
	}

	out = k.mustCall(t, "gmail_send_draft", `{"draft_id":"r-5124388118931112112"}`)
	if out["status"] != "sent" || out["id"] != "18c3000000000004" {
		t.Fatalf("out = %v", out)
	}
	if b := k.f.Last("POST /gmail/v1/users/me/drafts/send").Body; !strings.Contains(b, `"id":"r-5124388118931112112"`) {
		t.Fatalf("send draft body = %s", b)
	}
	k.f.On("POST /gmail/v1/users/me/drafts/send", 404, `{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}`)
	if _, err := k.call(t, "gmail_send_draft", `{"draft_id":"gone"}`); errCode(err) != tools.CodeNotFound {
		t.Fatalf("missing draft: %v", err)
	}
}

const labelsJSON = `{"labels": [
  {"id": "INBOX", "name": "INBOX", "messageListVisibility": "hide", "labelListVisibility": "labelShow", "type": "system"},
  {"id": "STARRED", "name": "STARRED", "type": "system"},
  {"id": "UNREAD", "name": "UNREAD", "type": "system"},
  {"id": "Label_3", "name": "Receipts", "messageListVisibility": "show", "labelListVisibility": "labelShow", "type": "user"}
]}`

func TestLabels(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/labels", 200, labelsJSON)
	k.f.On("POST /gmail/v1/users/me/messages/batchModify", 204, ``)

	out := k.mustCall(t, "gmail_list_labels", `{}`)
	ls := out["labels"].([]any)
	if len(ls) != 4 || ls[3].(map[string]any)["name"] != "Receipts" || ls[3].(map[string]any)["id"] != "Label_3" || ls[3].(map[string]any)["type"] != "user" {
		t.Fatalf("labels = %v", ls)
	}

	k.mustCall(t, "gmail_modify_labels", `{"message_ids":["m1","m2"],"add":["receipts","starred"],"remove":["UNREAD"]}`)
	var req struct{ Ids, AddLabelIds, RemoveLabelIds []string }
	json.Unmarshal([]byte(k.f.Last("POST /gmail/v1/users/me/messages/batchModify").Body), &req)
	if !slices.Equal(req.Ids, []string{"m1", "m2"}) || !slices.Equal(req.AddLabelIds, []string{"Label_3", "STARRED"}) || !slices.Equal(req.RemoveLabelIds, []string{"UNREAD"}) {
		t.Fatalf("batchModify = %+v", req)
	}

	_, err := k.call(t, "gmail_modify_labels", `{"message_ids":["m1"],"add":["Nope"]}`)
	if errCode(err) != tools.CodeInvalidArgument || !strings.Contains(err.(*tools.Error).JSON(), "Receipts") {
		t.Fatalf("unknown label: %v", err)
	}
	if _, err := k.call(t, "gmail_modify_labels", `{"message_ids":[],"add":["STARRED"]}`); errCode(err) != tools.CodeMissingParameter {
		t.Fatalf("no ids: %v", err)
	}
}

func TestArchiveAndTrash(t *testing.T) {
	k := newKit(t)
	k.f.On("POST /gmail/v1/users/me/messages/batchModify", 204, ``)
	k.f.On("POST /gmail/v1/users/me/messages/m1/trash", 200, `{"id":"m1","threadId":"t1","labelIds":["TRASH"]}`)

	out := k.mustCall(t, "gmail_archive", `{"message_ids":["m1","m2"]}`)
	var req struct{ Ids, RemoveLabelIds []string }
	json.Unmarshal([]byte(k.f.Last("POST /gmail/v1/users/me/messages/batchModify").Body), &req)
	if out["status"] != "archived" || !slices.Equal(req.RemoveLabelIds, []string{"INBOX"}) || len(req.Ids) != 2 {
		t.Fatalf("archive = %v %+v", out, req)
	}

	out = k.mustCall(t, "gmail_trash", `{"message_ids":["m1"]}`)
	if out["status"] != "trashed" || out["messages"].(float64) != 1 {
		t.Fatalf("trash = %v", out)
	}
	_, err := k.call(t, "gmail_trash", `{"message_ids":["m1","missing"]}`)
	if errCode(err) != tools.CodeNotFound || !strings.Contains(err.(*tools.Error).JSON(), `"trashed":["m1"]`) {
		t.Fatalf("partial trash: %v", err)
	}
}

func TestErrorsMap(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/messages/forbidden", 403, `{"error":{"code":403,"message":"Request had insufficient authentication scopes.","errors":[{"message":"Insufficient Permission","domain":"global","reason":"insufficientPermissions"}],"status":"PERMISSION_DENIED"}}`)
	k.f.On("GET /gmail/v1/users/me/messages", 400, `{"error":{"code":400,"message":"Invalid pageToken","errors":[{"message":"Invalid pageToken","domain":"global","reason":"invalidArgument"}],"status":"INVALID_ARGUMENT"}}`)
	k.f.On("GET /gmail/v1/users/me/labels", 503, `{"error":{"code":503,"message":"The service is currently unavailable.","status":"UNAVAILABLE"}}`)
	k.f.On("POST /gmail/v1/users/me/messages/send", 500, `{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}`)

	if _, err := k.call(t, "gmail_read", `{"message_id":"missing"}`); errCode(err) != tools.CodeNotFound {
		t.Fatalf("404: %v", err)
	}
	_, err := k.call(t, "gmail_read", `{"message_id":"forbidden"}`)
	if errCode(err) != tools.CodePermission || !strings.Contains(err.(*tools.Error).Suggestion, "/connect google") {
		t.Fatalf("403: %v", err)
	}
	if _, err := k.call(t, "gmail_search", `{"page_token":"bad"}`); errCode(err) != tools.CodeInvalidArgument || !strings.Contains(err.Error(), "Invalid pageToken") {
		t.Fatalf("400: %v", err)
	}
	if _, err := k.call(t, "gmail_list_labels", `{}`); errCode(err) != tools.CodeUnavailable {
		t.Fatalf("503: %v", err)
	}
	if n := k.f.Count("GET /gmail/v1/users/me/labels"); n != 3 {
		t.Fatalf("503 tried %d times, want 3", n)
	}
	if _, err := k.call(t, "gmail_send", `{"to":"a@example.com","subject":"s","body":"b"}`); errCode(err) != tools.CodeUnavailable {
		t.Fatalf("send 500: %v", err)
	}
	if n := k.f.Count("POST /gmail/v1/users/me/messages/send"); n != 1 {
		t.Fatalf("a failed send was retried %d times; it may have gone out", n)
	}
	if _, err := k.call(t, "gmail_read", `{"message_id":""}`); errCode(err) != tools.CodeMissingParameter {
		t.Fatalf("empty id: %v", err)
	}
}

func TestRetryThenSuccess(t *testing.T) {
	k := newKit(t)
	n := 0
	k.f.Handle("GET /gmail/v1/users/me/labels", func(googletest.Request) (int, string) {
		n++
		if n == 1 {
			return http.StatusTooManyRequests, `{"error":{"code":429,"message":"Too many concurrent requests for user","status":"RESOURCE_EXHAUSTED"}}`
		}
		return 200, labelsJSON
	})
	if _, err := k.call(t, "gmail_list_labels", `{}`); err != nil || n != 2 {
		t.Fatalf("err %v after %d calls", err, n)
	}
}

func TestNotConnected(t *testing.T) {
	k := newKit(t)
	k.client.Connected = map[string]bool{"telegram:7": true}
	for name, args := range map[string]string{
		"gmail_search": `{}`, "gmail_read": `{"message_id":"m1"}`, "gmail_send": `{"to":"a@example.com","subject":"s","body":"b"}`,
		"gmail_reply": `{"message_id":"m1","body":"b"}`, "gmail_create_draft": `{"to":"a@example.com","body":"b"}`,
		"gmail_send_draft": `{"draft_id":"d"}`, "gmail_list_labels": `{}`, "gmail_modify_labels": `{"message_ids":["m"],"add":["STARRED"]}`,
		"gmail_archive": `{"message_ids":["m"]}`, "gmail_trash": `{"message_ids":["m"]}`,
	} {
		_, err := k.call(t, name, args)
		if errCode(err) != tools.CodeNotConnected || !strings.Contains(err.(*tools.Error).Suggestion, "/connect google") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := len(k.f.Requests()); n != 0 {
		t.Fatalf("%d requests reached Google", n)
	}
}

func TestGroupDefinition(t *testing.T) {
	k := newKit(t)
	if k.group.Name != "google_gmail" || k.group.DisplayName == "" || k.group.Description == "" {
		t.Fatalf("group = %+v", k.group)
	}
	if len(k.tools) > 10 {
		t.Fatalf("%d tools", len(k.tools))
	}
	reg := tools.NewRegistry()
	var ts []tools.Tool
	for _, tl := range k.tools {
		ts = append(ts, tl)
	}
	if err := reg.AddGroup(k.group, ts...); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"gmail_search", "gmail_read", "gmail_list_labels"} {
		if !k.tools[n].ReadOnly {
			t.Errorf("%s not read-only", n)
		}
	}
}

// TEST: google.gmail.send: draft — a send and a reply become drafts,
// nothing reaches messages.send, sending a draft is refused, and none of
// them waits for approval (a draft goes to nobody).
func TestDraftOnlyMode(t *testing.T) {
	k := newKitSending(t, "draft")
	k.f.On("POST /gmail/v1/users/me/drafts", 200, `{"id":"r-1","message":{"id":"m-1","threadId":"t-1"}}`)
	k.f.On("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5", 200, origJSON)
	k.f.On("GET /gmail/v1/users/me/profile", 200, `{"emailAddress":"ana@example.com"}`)
	out := k.mustCall(t, "gmail_send", `{"to":"bob@example.com","subject":"Invoice","body":"Attached."}`)
	if !strings.HasPrefix(out["status"].(string), "saved as a draft, not sent") || out["draft_id"] != "r-1" {
		t.Fatalf("send = %v", out)
	}
	msg, text, _ := sentMIME(t, draftRaw(t, k.f.Last("POST /gmail/v1/users/me/drafts").Body))
	if msg.Header.Get("To") != "<bob@example.com>" || text != "Attached." {
		t.Fatalf("draft = %v %q", msg.Header, text)
	}
	out = k.mustCall(t, "gmail_reply", `{"message_id":"18c2a1f0b2d3e4f5","body":"Thanks!","reply_all":true}`)
	if !strings.HasPrefix(out["status"].(string), "saved as a draft") {
		t.Fatalf("reply = %v", out)
	}
	if _, err := k.call(t, "gmail_send_draft", `{"draft_id":"r-1"}`); err == nil || !strings.Contains(err.Error(), "google.gmail.send: draft") {
		t.Fatalf("send_draft = %v", err)
	}
	if n := k.f.Count("POST /gmail/v1/users/me/messages/send") + k.f.Count("POST /gmail/v1/users/me/drafts/send"); n != 0 {
		t.Fatalf("%d sends reached Gmail", n)
	}
	for _, name := range []string{"gmail_send", "gmail_reply"} {
		if e := tools.EffectOf(context.Background(), k.tools[name].Definition, nil); e != tools.EffectMutate {
			t.Errorf("%s effect in draft mode = %v", name, e)
		}
	}
	normal := newKit(t)
	for _, name := range []string{"gmail_send", "gmail_reply", "gmail_send_draft", "gmail_trash"} {
		if e := tools.EffectOf(context.Background(), normal.tools[name].Definition, nil); e != tools.EffectDestructive {
			t.Errorf("%s effect = %v", name, e)
		}
	}
	send := normal.tools["gmail_send"]
	in, err := send.Decode([]byte(`{"to":"ana@example.com","subject":"Invoice","body":"a\nb\nc"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := tools.Summary(context.Background(), send.Definition, tools.Input{Value: in}); s != "Send an email to ana@example.com, subject 'Invoice', 3 lines" {
		t.Errorf("summary = %q", s)
	}
}

// draftRaw turns a drafts.create body into the {"raw":…} shape sentMIME
// reads.
func draftRaw(t *testing.T, body string) string {
	t.Helper()
	var req struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return string(req.Message)
}

// gmail_read with attachment reads one: a text type as text, a PDF as its
// text, anything else only described; an unknown name lists the ones
// there are.
func TestReadAttachment(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/messages/m1", 200, `{"id":"m1","threadId":"t1","payload":{"mimeType":"multipart/mixed","headers":[{"name":"Subject","value":"Files"}],"parts":[
		{"mimeType":"text/plain","body":{"data":"`+base64.URLEncoding.EncodeToString([]byte("See attached."))+`"}},
		{"mimeType":"text/csv","filename":"totals.csv","body":{"attachmentId":"a1","size":20}},
		{"mimeType":"application/pdf","filename":"Invoice.pdf","body":{"attachmentId":"a2","size":900}},
		{"mimeType":"image/png","filename":"logo.png","body":{"attachmentId":"a3","size":5000}}]}}`)
	k.f.On("GET /gmail/v1/users/me/messages/m1/attachments/a1", 200, `{"size":20,"data":"`+base64.URLEncoding.EncodeToString([]byte("month,total\nmarch,42\n"))+`"}`)
	k.f.On("GET /gmail/v1/users/me/messages/m1/attachments/a2", 200, `{"size":900,"data":"`+base64.URLEncoding.EncodeToString(pdftest.Document("", "Amount due 42 EUR"))+`"}`)
	out := k.mustCall(t, "gmail_read", `{"message_id":"m1","attachment":"totals.csv"}`)
	if out["text"] != "month,total\nmarch,42\n" || out["mime_type"] != "text/csv" {
		t.Fatalf("csv = %v", out)
	}
	out = k.mustCall(t, "gmail_read", `{"message_id":"m1","attachment":"invoice.PDF"}`)
	if text, _ := out["text"].(string); !strings.Contains(text, "Amount due 42 EUR") {
		t.Fatalf("pdf = %v", out)
	}
	out = k.mustCall(t, "gmail_read", `{"message_id":"m1","attachment":"a3"}`)
	if out["text"] != nil || !strings.Contains(out["note"].(string), "only its description") || out["size"] != float64(5000) {
		t.Fatalf("png = %v", out)
	}
	if k.f.Count("GET /gmail/v1/users/me/messages/m1/attachments/a3") != 0 {
		t.Fatal("an image was downloaded")
	}
	if _, err := k.call(t, "gmail_read", `{"message_id":"m1","attachment":"nope.txt"}`); errCode(err) != tools.CodeNotFound || !strings.Contains(err.Error(), "no attachment 'nope.txt'") {
		t.Fatalf("unknown attachment: %v", err)
	}
}

// With markdown: true a send carries the text and its HTML rendering as
// multipart/alternative.
func TestSendMarkdownAsHTMLAlternative(t *testing.T) {
	k := newKit(t)
	k.f.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"s1","threadId":"s1"}`)
	k.mustCall(t, "gmail_send", `{"to":"bob@example.com","subject":"Plan","body":"Hi **Bob**,\n\n- ship on *Friday*\n- see [the doc](https://example.com/doc)","markdown":true}`)
	var req map[string]any
	json.Unmarshal([]byte(k.f.Last("POST /gmail/v1/users/me/messages/send").Body), &req)
	raw, err := base64.URLEncoding.DecodeString(req["raw"].(string))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type = %q, %v", msg.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	got := map[string]string{}
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(quotedprintable.NewReader(p))
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		got[ct] = string(body)
	}
	if !strings.Contains(got["text/plain"], "Hi **Bob**") {
		t.Errorf("text part = %q", got["text/plain"])
	}
	for _, want := range []string{"<strong>Bob</strong>", "<li>ship on <em>Friday</em></li>", `<a href="https://example.com/doc">the doc</a>`} {
		if !strings.Contains(got["text/html"], want) {
			t.Errorf("html part lacks %q:\n%s", want, got["text/html"])
		}
	}
}

// TEST (findings: a case-variant Bcc; summaries that hide recipients):
// {"bcc":…,"Bcc":""} is refused before Google is reached; for generated
// recipient lists, every address the fake Gmail receives in To, Cc and
// Bcc is named in the summary the person approves (or counted in its
// "and N others"), Bcc always by name.
func TestSendSummaryNamesEveryRecipientItSends(t *testing.T) {
	k := newKit(t)
	k.f.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"m1","threadId":"t1","labelIds":["SENT"]}`)
	if _, err := k.call(t, "gmail_send", `{"to":"ana@example.com","subject":"Invoice","body":"x","bcc":"attacker@evil.example","Bcc":""}`); errCode(err) != tools.CodeInvalidArgument {
		t.Fatalf("case-variant bcc: %v", err)
	}
	if n := len(k.f.Requests()); n != 0 {
		t.Fatalf("%d requests reached Google", n)
	}
	send := k.tools["gmail_send"]
	rng := rand.New(rand.NewPCG(24, 1))
	list := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d-%d@example.com", prefix, i, rng.IntN(1000))
			if rng.IntN(3) == 0 {
				out[i] = fmt.Sprintf("\"Ana, from %d\" <%s>", i, out[i])
			}
		}
		return out
	}
	for i := range 40 {
		to, cc, bcc := list("to", 1+rng.IntN(6)), list("cc", rng.IntN(5)), list("bcc", rng.IntN(3))
		args, _ := json.Marshal(map[string]string{"to": strings.Join(to, ", "), "cc": strings.Join(cc, ", "), "bcc": strings.Join(bcc, ", "),
			"subject": "s", "body": "b"})
		in, err := send.Decode(args)
		if err != nil {
			t.Fatal(err)
		}
		summary := tools.Summary(context.Background(), send.Definition, tools.Input{Value: in})
		k.mustCall(t, "gmail_send", string(args))
		msg, _, _ := sentMIME(t, k.f.Last("POST /gmail/v1/users/me/messages/send").Body)
		for _, h := range []struct {
			header, label string
			most          int
		}{{"To", "", 3}, {"Cc", "cc ", 3}, {"Bcc", "bcc ", 3}} {
			got, _ := msg.Header.AddressList(h.header)
			named := 0
			for _, a := range got {
				if strings.Contains(summary, a.Address) {
					named++
				}
			}
			if len(got) > h.most {
				if named != h.most || !strings.Contains(summary, fmt.Sprintf("and %d others", len(got)-h.most)) {
					t.Fatalf("case %d: %s has %d addresses, summary %q", i, h.header, len(got), summary)
				}
			} else if named != len(got) {
				t.Fatalf("case %d: %s %v not all in summary %q", i, h.header, got, summary)
			}
			if len(got) > 0 && h.label != "" && !strings.Contains(summary, ", "+h.label) {
				t.Fatalf("case %d: %s not named in %q", i, h.header, summary)
			}
		}
	}
}
