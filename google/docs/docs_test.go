package docs_test

import (
	"strings"
	"testing"

	"loadout/google"
	"loadout/google/docs"
	"loadout/google/googletest"
	"loadout/tools"
)

const user = "telegram:1"

func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, docs.New(c, docs.Options{Backoff: googletest.Backoff, MaxChars: 400}), user, name, args)
}

var (
	decode   = googletest.Decode
	check    = googletest.Check
	requests = googletest.BatchRequests
)

// plan is a document with a title, headings, a bulleted and a numbered
// list, a table, bold, italic and a link.
const plan = `{"documentId":"d1","title":"Plan","lists":{
  "kix.b":{"listProperties":{"nestingLevels":[{"glyphSymbol":"●"},{"glyphSymbol":"○"}]}},
  "kix.n":{"listProperties":{"nestingLevels":[{"glyphType":"DECIMAL"}]}}},
 "body":{"content":[
  {"sectionBreak":{}, "endIndex":1},
  {"startIndex":1,"endIndex":7,"paragraph":{"paragraphStyle":{"namedStyleType":"HEADING_1"},"elements":[{"textRun":{"content":"Goals\n"}}]}},
  {"startIndex":7,"endIndex":40,"paragraph":{"paragraphStyle":{"namedStyleType":"NORMAL_TEXT"},"elements":[
     {"textRun":{"content":"Ship "}},{"textRun":{"content":"fast","textStyle":{"bold":true}}},
     {"textRun":{"content":" and ","textStyle":{}}},{"textRun":{"content":"well","textStyle":{"italic":true}}},
     {"textRun":{"content":", see "}},{"textRun":{"content":"the spec","textStyle":{"link":{"url":"https://example.com/spec"}}}},{"textRun":{"content":".\n"}}]}},
  {"startIndex":40,"endIndex":46,"paragraph":{"bullet":{"listId":"kix.b"},"elements":[{"textRun":{"content":"Docs\n"}}]}},
  {"startIndex":46,"endIndex":52,"paragraph":{"bullet":{"listId":"kix.b","nestingLevel":1},"elements":[{"textRun":{"content":"APIs\n"}}]}},
  {"startIndex":52,"endIndex":58,"paragraph":{"bullet":{"listId":"kix.n"},"elements":[{"textRun":{"content":"First\n"}}]}},
  {"startIndex":58,"endIndex":70,"paragraph":{"paragraphStyle":{"namedStyleType":"HEADING_2"},"elements":[{"textRun":{"content":"Budget\n"}}]}},
  {"startIndex":70,"endIndex":90,"table":{"rows":2,"columns":2,"tableRows":[
     {"tableCells":[{"content":[{"paragraph":{"elements":[{"textRun":{"content":"Item\n"}}]}}]},{"content":[{"paragraph":{"elements":[{"textRun":{"content":"Cost\n"}}]}}]}]},
     {"tableCells":[{"content":[{"paragraph":{"elements":[{"textRun":{"content":"Servers | VMs\n"}}]}}]},{"content":[{"paragraph":{"elements":[{"textRun":{"content":"100\n"}}]}}]}]}]}},
  {"startIndex":90,"endIndex":97,"paragraph":{"paragraphStyle":{"namedStyleType":"HEADING_2"},"elements":[{"textRun":{"content":"Risks\n"}}]}}
 ]}}`

const planMarkdown = `# Plan

# Goals

Ship **fast** and *well*, see [the spec](https://example.com/spec).

- Docs
  - APIs
1. First

## Budget

| Item | Cost |
| --- | --- |
| Servers \| VMs | 100 |

## Risks
`

func TestGroup(t *testing.T) {
	g := docs.New(&googletest.Client{}, docs.Options{})
	check(t, "name", g.Name, "google_docs")
	check(t, "scopes", g.Scopes, []string{"https://www.googleapis.com/auth/documents", "https://www.googleapis.com/auth/drive.readonly"})
}

func TestReadAsMarkdownInParts(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /docs/v1/documents/d1", 200, plan)
	out := decode(t, run(t, f.Client(), "docs_read", `{"document_id":"d1"}`))
	if out["markdown"] != planMarkdown {
		t.Fatalf("markdown:\n%s\nwant:\n%s", out["markdown"], planMarkdown)
	}
	long := strings.Replace(plan, `"content":"Docs\n"`, `"content":"`+strings.Repeat("word ", 100)+`\n"`, 1)
	f.On("GET /docs/v1/documents/d2", 200, strings.Replace(long, `"documentId":"d1"`, `"documentId":"d2"`, 1))
	out = decode(t, run(t, f.Client(), "docs_read", `{"document_id":"d2"}`))
	if out["next_offset"] != float64(400) || len([]rune(out["markdown"].(string))) != 400 {
		t.Fatalf("first part: next %v, %d chars", out["next_offset"], len([]rune(out["markdown"].(string))))
	}
	out = decode(t, run(t, f.Client(), "docs_read", `{"document_id":"d2","offset":400}`))
	if !strings.HasSuffix(out["markdown"].(string), "## Risks\n") {
		t.Fatalf("second part ends %q", out["markdown"])
	}
}

func TestCreateWriteReplace(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("POST /docs/v1/documents", 200, `{"documentId":"d9","title":"Notes"}`)
	f.On("POST /docs/v1/documents/d9:batchUpdate", 200, `{"documentId":"d9","replies":[{}]}`)
	f.On("GET /docs/v1/documents/d1", 200, plan)
	f.On("POST /docs/v1/documents/d1:batchUpdate", 200, `{"documentId":"d1","replies":[{"replaceAllText":{"occurrencesChanged":3}}]}`)

	out := decode(t, run(t, f.Client(), "docs_create", `{"title":"Notes","text":"First line"}`))
	check(t, "created", []any{out["document_id"], out["link"]}, []any{"d9", "https://docs.google.com/document/d/d9/edit"})
	r := requests(t, f.Last("POST /docs/v1/documents/d9:batchUpdate"))
	check(t, "initial text", r[0]["insertText"], map[string]any{"text": "First line", "endOfSegmentLocation": map[string]any{}})

	decode(t, run(t, f.Client(), "docs_write", `{"document_id":"d1","text":"More."}`))
	r = requests(t, f.Last("POST /docs/v1/documents/d1:batchUpdate"))
	check(t, "append", r[0]["insertText"], map[string]any{"text": "\nMore.", "endOfSegmentLocation": map[string]any{}})

	decode(t, run(t, f.Client(), "docs_write", `{"document_id":"d1","text":"Hosting costs","after_heading":"  budget "}`))
	r = requests(t, f.Last("POST /docs/v1/documents/d1:batchUpdate"))
	check(t, "under a heading", r[0]["insertText"], map[string]any{"text": "Hosting costs\n", "location": map[string]any{"index": float64(70)}})

	decode(t, run(t, f.Client(), "docs_write", `{"document_id":"d1","text":"Late","after_heading":"Risks"}`))
	r = requests(t, f.Last("POST /docs/v1/documents/d1:batchUpdate"))
	check(t, "under the last heading", []any{r[0]["insertText"], r[1]["updateParagraphStyle"]}, []any{
		map[string]any{"text": "\nLate", "endOfSegmentLocation": map[string]any{}},
		map[string]any{"fields": "namedStyleType", "paragraphStyle": map[string]any{"namedStyleType": "NORMAL_TEXT"},
			"range": map[string]any{"startIndex": float64(97), "endIndex": float64(101)}}})

	googletest.WantError(t, run(t, f.Client(), "docs_write", `{"document_id":"d1","text":"x","after_heading":"Timeline"}`), tools.CodeNotFound, "Goals; Budget; Risks")

	out = decode(t, run(t, f.Client(), "docs_replace", `{"document_id":"d1","find":"2025","replace":"2026","match_case":true}`))
	check(t, "occurrences", out["occurrences"], 3)
	r = requests(t, f.Last("POST /docs/v1/documents/d1:batchUpdate"))
	check(t, "replace", r[0]["replaceAllText"], map[string]any{"replaceText": "2026", "containsText": map[string]any{"text": "2025", "matchCase": true}})
}

func TestComments(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /drive/v3/files/d1/comments", 200, `{"comments":[
		{"id":"c1","content":"Too vague","author":{"displayName":"Bob"},"createdTime":"2026-03-01T10:00:00Z","quotedFileContent":{"value":"Ship fast"},
		 "replies":[{"content":"Agreed","author":{"displayName":"Ana"}}]},
		{"id":"c2","content":"Fixed","author":{"displayName":"Ana"},"createdTime":"2026-03-02T10:00:00Z","resolved":true}]}`)
	out := decode(t, run(t, f.Client(), "docs_comments", `{"document_id":"d1"}`))
	check(t, "comments", out["comments"], []any{map[string]any{"id": "c1", "author": "Bob", "text": "Too vague", "on": "Ship fast",
		"created": "2026-03-01T10:00:00Z", "replies": []any{map[string]any{"author": "Ana", "text": "Agreed"}}}})
	if q := f.Last("GET /drive/v3/files/d1/comments").Query.Get("fields"); !strings.Contains(q, "quotedFileContent") {
		t.Errorf("fields = %q", q)
	}
	out = decode(t, run(t, f.Client(), "docs_comments", `{"document_id":"d1","include_resolved":true}`))
	check(t, "with resolved", len(out["comments"].([]any)), 2)
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "GET /docs/v1/documents/d9", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "forbidden", Code: tools.CodePermission, Tries: 1},
		{Name: "server error", Status: 500, Reason: "backendError", Code: tools.CodeUnavailable, Tries: 3},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "docs_read", `{"document_id":"d9"}`)
	})
}
