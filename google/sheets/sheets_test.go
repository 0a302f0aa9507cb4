package sheets_test

import (
	"testing"

	"loadout/google"
	"loadout/google/googletest"
	"loadout/google/sheets"
	"loadout/tools"
)

const user = "telegram:1"

func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, sheets.New(c, sheets.Options{Backoff: googletest.Backoff, MaxCells: 6}), user, name, args)
}

var (
	decode = googletest.Decode
	check  = googletest.Check
	body   = googletest.Body
)

func TestCreateAndInfoListEverySheet(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("POST /sheets/v4/spreadsheets", 200, `{"spreadsheetId":"s1","sheets":[{"properties":{"sheetId":0,"title":"Costs"}},{"properties":{"sheetId":7,"title":"Income"}}]}`)
	f.On("GET /sheets/v4/spreadsheets/s1", 200, `{"spreadsheetId":"s1","properties":{"title":"Budget","timeZone":"Europe/Lisbon"},"sheets":[
		{"properties":{"sheetId":0,"title":"Costs","gridProperties":{"rowCount":1000,"columnCount":26}}},
		{"properties":{"sheetId":7,"title":"Income","gridProperties":{"rowCount":50,"columnCount":4}}}]}`)
	out := decode(t, run(t, f.Client(), "sheets_create", `{"title":"Budget","sheets":["Costs","Income"]}`))
	check(t, "created", []any{out["spreadsheet_id"], len(out["sheets"].([]any))}, []any{"s1", 2})
	b := body(t, f.Last("POST /sheets/v4/spreadsheets"))
	check(t, "create body", []any{b["properties"], len(b["sheets"].([]any))}, []any{map[string]any{"title": "Budget"}, 2})

	out = decode(t, run(t, f.Client(), "sheets_info", `{"spreadsheet_id":"s1"}`))
	check(t, "info", out["sheets"], []any{
		map[string]any{"sheet_id": 0, "title": "Costs", "rows": 1000, "columns": 26},
		map[string]any{"sheet_id": 7, "title": "Income", "rows": 50, "columns": 4},
	})
	check(t, "title", out["title"], "Budget")
}

func TestReadAnySheetCapped(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /sheets/v4/spreadsheets/s1/values/*", 200, `{"range":"Income!A1:C4","values":[["Month","In","Out"],["Jan","100","80"],["Feb","90"],["Mar","120","70"]]}`)
	out := decode(t, run(t, f.Client(), "sheets_read", `{"spreadsheet_id":"s1","range":"Income!A1:C4"}`))
	check(t, "rows", out["rows"], []any{[]any{"Month", "In", "Out"}, []any{"Jan", "100", "80"}})
	if out["note"] == nil {
		t.Error("no note that the rows were cut")
	}
	r := f.Requests()[len(f.Requests())-1]
	check(t, "path", r.Path, "/sheets/v4/spreadsheets/s1/values/Income!A1:C4")
	check(t, "render", r.Query.Get("valueRenderOption"), "FORMATTED_VALUE")
}

func TestWriteAppendClearAndTabs(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("PUT /sheets/v4/spreadsheets/s1/values/*", 200, `{"updatedRange":"Costs!A2:B3","updatedRows":2,"updatedCells":4}`)
	f.On("POST /sheets/v4/spreadsheets/s1/values/*", 200, `{"updates":{"updatedRange":"Costs!A5:B5","updatedRows":1,"updatedCells":2},"clearedRange":"Costs!A1:Z1000"}`)
	f.On("POST /sheets/v4/spreadsheets/s1:batchUpdate", 200, `{"replies":[{"addSheet":{"properties":{"sheetId":42,"title":"Q2"}}}]}`)

	out := decode(t, run(t, f.Client(), "sheets_write", `{"spreadsheet_id":"s1","range":"Costs!A2","values":[["Rent",900],["Food","=B2/3"]]}`))
	check(t, "write", []any{out["status"], out["cells"]}, []any{"written", 4})
	r := f.Requests()[len(f.Requests())-1]
	check(t, "write input", r.Query.Get("valueInputOption"), "USER_ENTERED")
	check(t, "write values", body(t, r)["values"], []any{[]any{"Rent", 900}, []any{"Food", "=B2/3"}})

	out = decode(t, run(t, f.Client(), "sheets_write", `{"spreadsheet_id":"s1","range":"Costs!A:B","values":[["Gym",40]],"append":true}`))
	check(t, "append", []any{out["status"], out["range"]}, []any{"appended", "Costs!A5:B5"})
	r = f.Requests()[len(f.Requests())-1]
	check(t, "append path", []any{r.Path, r.Query.Get("insertDataOption")}, []any{"/sheets/v4/spreadsheets/s1/values/Costs!A:B:append", "INSERT_ROWS"})

	out = decode(t, run(t, f.Client(), "sheets_clear", `{"spreadsheet_id":"s1","range":"Costs"}`))
	check(t, "clear", out["range"], "Costs!A1:Z1000")
	check(t, "clear path", f.Requests()[len(f.Requests())-1].Path, "/sheets/v4/spreadsheets/s1/values/Costs:clear")

	out = decode(t, run(t, f.Client(), "sheets_tabs", `{"spreadsheet_id":"s1","action":"add","title":"Q2"}`))
	check(t, "added", out["sheet_id"], 42)
	decode(t, run(t, f.Client(), "sheets_tabs", `{"spreadsheet_id":"s1","action":"rename","sheet_id":0,"title":"Spend"}`))
	b := body(t, f.Last("POST /sheets/v4/spreadsheets/s1:batchUpdate"))
	check(t, "rename", b["requests"], []any{map[string]any{"updateSheetProperties": map[string]any{"fields": "title",
		"properties": map[string]any{"sheetId": 0, "title": "Spend"}}}})
	decode(t, run(t, f.Client(), "sheets_tabs", `{"spreadsheet_id":"s1","action":"delete","sheet_id":0}`))
	b = body(t, f.Last("POST /sheets/v4/spreadsheets/s1:batchUpdate"))
	check(t, "delete", b["requests"], []any{map[string]any{"deleteSheet": map[string]any{"sheetId": 0}}})
	googletest.WantError(t, run(t, f.Client(), "sheets_write", `{"spreadsheet_id":"s1","range":"A1","values":[]}`), tools.CodeMissingParameter, "values")
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "GET /sheets/v4/spreadsheets/s9", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "forbidden", Code: tools.CodePermission, Tries: 1},
		{Name: "rate limited", Status: 429, Reason: "rateLimitExceeded", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "bad range", Status: 400, Reason: "badRequest", Code: tools.CodeInvalidArgument, Tries: 1},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "sheets_info", `{"spreadsheet_id":"s9"}`)
	})
}
