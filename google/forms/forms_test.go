package forms_test

import (
	"testing"

	"loadout/google"
	"loadout/google/forms"
	"loadout/google/googletest"
	"loadout/tools"
)

const user = "telegram:1"

func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, forms.New(c, forms.Options{Backoff: googletest.Backoff}), user, name, args)
}

var (
	decode = googletest.Decode
	check  = googletest.Check
	body   = googletest.Body
)

const survey = `{"formId":"f1","responderUri":"https://docs.google.com/forms/d/e/x/viewform","info":{"title":"Lunch","description":"Pick one"},
 "items":[
  {"itemId":"i1","title":"Your name","questionItem":{"question":{"questionId":"q1","required":true,"textQuestion":{}}}},
  {"itemId":"i0","title":"Section","textItem":{}},
  {"itemId":"i2","title":"Dish","questionItem":{"question":{"questionId":"q2","choiceQuestion":{"type":"RADIO","options":[{"value":"Soup"},{"value":"Salad"},{"isOther":true}]}}}},
  {"itemId":"i3","title":"When","questionItem":{"question":{"questionId":"q3","dateQuestion":{"includeYear":true}}}}]}`

func TestReadQuestions(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /forms/v1/forms/f1", 200, survey)
	out := decode(t, run(t, f.Client(), "forms_read", `{"form_id":"f1"}`))
	check(t, "questions", out["questions"], []any{
		map[string]any{"item_id": "i1", "question_id": "q1", "title": "Your name", "kind": "text", "required": true},
		map[string]any{"item_id": "i2", "question_id": "q2", "title": "Dish", "kind": "choice", "options": []any{"Soup", "Salad", "(other)"}},
		map[string]any{"item_id": "i3", "question_id": "q3", "title": "When", "kind": "date"},
	})
	check(t, "info", []any{out["title"], out["description"], out["responder_link"]}, []any{"Lunch", "Pick one", "https://docs.google.com/forms/d/e/x/viewform"})
}

func TestCreateAndAddQuestions(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("POST /forms/v1/forms", 200, `{"formId":"f2","responderUri":"https://docs.google.com/forms/d/e/y/viewform","info":{"title":"Poll"}}`)
	f.On("POST /forms/v1/forms/f2:batchUpdate", 200, `{"replies":[{}]}`)
	f.On("GET /forms/v1/forms/f1", 200, survey)
	f.On("POST /forms/v1/forms/f1:batchUpdate", 200, `{"replies":[{"createItem":{"itemId":"n1"}},{"createItem":{"itemId":"n2"}}]}`)
	out := decode(t, run(t, f.Client(), "forms_create", `{"title":"Poll","description":"Quick one"}`))
	check(t, "created", []any{out["form_id"], out["edit_link"]}, []any{"f2", "https://docs.google.com/forms/d/f2/edit"})
	b := body(t, f.Last("POST /forms/v1/forms/f2:batchUpdate"))
	check(t, "description", b["requests"], []any{map[string]any{"updateFormInfo": map[string]any{"info": map[string]any{"description": "Quick one"}, "updateMask": "description"}}})

	out = decode(t, run(t, f.Client(), "forms_add_questions", `{"form_id":"f1","questions":[
		{"title":"Drink","kind":"dropdown","options":["Water","Juice"],"required":true},
		{"title":"Comments","kind":"paragraph"}]}`))
	check(t, "ids", out["item_ids"], []any{"n1", "n2"})
	b = body(t, f.Last("POST /forms/v1/forms/f1:batchUpdate"))
	check(t, "requests", b["requests"], []any{
		map[string]any{"createItem": map[string]any{"location": map[string]any{"index": 4}, "item": map[string]any{"title": "Drink",
			"questionItem": map[string]any{"question": map[string]any{"required": true, "choiceQuestion": map[string]any{"type": "DROP_DOWN",
				"options": []any{map[string]any{"value": "Water"}, map[string]any{"value": "Juice"}}}}}}}},
		map[string]any{"createItem": map[string]any{"location": map[string]any{"index": 5}, "item": map[string]any{"title": "Comments",
			"questionItem": map[string]any{"question": map[string]any{"textQuestion": map[string]any{"paragraph": true}}}}}},
	})
	googletest.WantError(t, run(t, f.Client(), "forms_add_questions", `{"form_id":"f1","index":0,"questions":[{"title":"Pick","kind":"choice"}]}`),
		tools.CodeInvalidArgument, "questions[0].options")
}

func TestResponses(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /forms/v1/forms/f1", 200, survey)
	f.On("GET /forms/v1/forms/f1/responses", 200, `{"responses":[{"responseId":"r1","lastSubmittedTime":"2026-03-01T12:00:00Z","respondentEmail":"bob@example.com",
		"answers":{"q1":{"questionId":"q1","textAnswers":{"answers":[{"value":"Bob"}]}},"q2":{"questionId":"q2","textAnswers":{"answers":[{"value":"Soup"}]}}}}],
		"nextPageToken":"n"}`)
	f.On("GET /forms/v1/forms/f1/responses/r1", 200, `{"responseId":"r1","lastSubmittedTime":"2026-03-01T12:00:00Z",
		"answers":{"q3":{"questionId":"q3","textAnswers":{"answers":[{"value":"2026-03-05"}]}}}}`)
	out := decode(t, run(t, f.Client(), "forms_responses", `{"form_id":"f1"}`))
	check(t, "responses", out["responses"], []any{map[string]any{"response_id": "r1", "submitted": "2026-03-01T12:00:00Z",
		"email": "bob@example.com", "answers": map[string]any{"Your name": "Bob", "Dish": "Soup"}}})
	check(t, "next", out["next_page_token"], "n")
	out = decode(t, run(t, f.Client(), "forms_response", `{"form_id":"f1","response_id":"r1"}`))
	check(t, "one", out["answers"], map[string]any{"When": "2026-03-05"})
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "GET /forms/v1/forms/f9", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "forbidden", Code: tools.CodePermission, Tries: 1},
		{Name: "server error", Status: 500, Reason: "backendError", Code: tools.CodeUnavailable, Tries: 3},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "forms_read", `{"form_id":"f9"}`)
	})
}
