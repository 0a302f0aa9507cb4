package slides_test

import (
	"strings"
	"testing"

	"loadout/google"
	"loadout/google/googletest"
	"loadout/google/slides"
	"loadout/tools"
)

const user = "telegram:1"

func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, slides.New(c, slides.Options{Backoff: googletest.Backoff}), user, name, args)
}

var (
	decode   = googletest.Decode
	check    = googletest.Check
	requests = googletest.BatchRequests
)

const deck = `{"presentationId":"p1","title":"Q1 review","slides":[
 {"objectId":"s1","pageElements":[
   {"objectId":"t1","shape":{"text":{"textElements":[{"textRun":{"content":"Q1 review\n"}}]}}},
   {"objectId":"g1","elementGroup":{"children":[{"objectId":"t2","shape":{"text":{"textElements":[{"textRun":{"content":"Revenue up\n"}},{"textRun":{"content":"Costs flat\n"}}]}}}]}}],
  "slideProperties":{"notesPage":{"notesProperties":{"speakerNotesObjectId":"n1"},"pageElements":[
   {"objectId":"n0","shape":{"text":{"textElements":[{"textRun":{"content":"slide image\n"}}]}}},
   {"objectId":"n1","shape":{"text":{"textElements":[{"textRun":{"content":"Thank the team.\n"}}]}}}]}}},
 {"objectId":"s2","pageElements":[{"objectId":"tb","table":{"tableRows":[
   {"tableCells":[{"text":{"textElements":[{"textRun":{"content":"Region\n"}}]}},{"text":{"textElements":[{"textRun":{"content":"Sales\n"}}]}}]},
   {"tableCells":[{"text":{"textElements":[{"textRun":{"content":"EU\n"}}]}},{"text":{"textElements":[{"textRun":{"content":"120\n"}}]}}]}]}}],
  "slideProperties":{"isSkipped":true}}]}`

func TestReadEverySlideAndNotes(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /slides/v1/presentations/p1", 200, deck)
	out := decode(t, run(t, f.Client(), "slides_read", `{"presentation_id":"p1"}`))
	check(t, "slides", out["slides"], []any{
		map[string]any{"index": 1, "object_id": "s1", "text": "Q1 review\nRevenue up\nCosts flat", "notes": "Thank the team."},
		map[string]any{"index": 2, "object_id": "s2", "text": "Region | Sales\nEU | 120", "skipped": true},
	})
}

func TestCreateAddReplaceImage(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("POST /slides/v1/presentations", 200, `{"presentationId":"p9","title":"Plan","slides":[{"objectId":"p"}]}`)
	f.On("POST /slides/v1/presentations/p1:batchUpdate", 200, `{"presentationId":"p1","replies":[{"replaceAllText":{"occurrencesChanged":2}}]}`)
	out := decode(t, run(t, f.Client(), "slides_create", `{"title":"Plan"}`))
	check(t, "created", []any{out["presentation_id"], out["link"]}, []any{"p9", "https://docs.google.com/presentation/d/p9/edit"})

	out = decode(t, run(t, f.Client(), "slides_add", `{"presentation_id":"p1","layout":"TITLE","position":0,"title":"Hello","body":"World"}`))
	r := requests(t, f.Last("POST /slides/v1/presentations/p1:batchUpdate"))
	cs := r[0]["createSlide"].(map[string]any)
	check(t, "layout", cs["slideLayoutReference"], map[string]any{"predefinedLayout": "TITLE"})
	check(t, "position", cs["insertionIndex"], 0)
	check(t, "slide id", cs["objectId"], out["slide_id"])
	maps := cs["placeholderIdMappings"].([]any)
	title := maps[0].(map[string]any)
	check(t, "title placeholder", title["layoutPlaceholder"], map[string]any{"type": "CENTERED_TITLE"})
	check(t, "title text", r[1]["insertText"], map[string]any{"objectId": title["objectId"], "text": "Hello"})
	check(t, "subtitle", maps[1].(map[string]any)["layoutPlaceholder"], map[string]any{"type": "SUBTITLE"})

	out = decode(t, run(t, f.Client(), "slides_replace_text", `{"presentation_id":"p1","find":"2025","replace":"2026"}`))
	check(t, "replaced", out["occurrences"], 2)

	decode(t, run(t, f.Client(), "slides_insert_image", `{"presentation_id":"p1","slide_id":"s1","url":"https://example.com/chart.png"}`))
	img := requests(t, f.Last("POST /slides/v1/presentations/p1:batchUpdate"))[0]["createImage"].(map[string]any)
	check(t, "image", []any{img["url"], img["elementProperties"]}, []any{"https://example.com/chart.png", map[string]any{"pageObjectId": "s1"}})
	if !strings.HasPrefix(img["objectId"].(string), "image_") {
		t.Errorf("image id = %v", img["objectId"])
	}
	googletest.WantError(t, run(t, f.Client(), "slides_insert_image", `{"presentation_id":"p1","slide_id":"s1","url":"file:///etc/passwd"}`), tools.CodeInvalidArgument, "https")
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "GET /slides/v1/presentations/p9", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "forbidden", Code: tools.CodePermission, Tries: 1},
		{Name: "server error", Status: 502, Reason: "backendError", Code: tools.CodeUnavailable, Tries: 3},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "slides_read", `{"presentation_id":"p9"}`)
	})
}
