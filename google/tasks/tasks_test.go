package tasks_test

import (
	"context"
	"testing"

	"loadout/google"
	"loadout/google/googletest"
	"loadout/google/tasks"
	"loadout/tools"
)

const user = "telegram:1"

func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, tasks.New(c, tasks.Options{Backoff: googletest.Backoff}), user, name, args)
}

var (
	decode = googletest.Decode
	check  = googletest.Check
	body   = googletest.Body
)

func TestGroup(t *testing.T) {
	g := tasks.New(&googletest.Client{}, tasks.Options{})
	check(t, "name", g.Name, "google_tasks")
	check(t, "scopes", g.Scopes, []string{"https://www.googleapis.com/auth/tasks"})
	if len(g.Tools) > 10 {
		t.Fatalf("%d tools", len(g.Tools))
	}
}

func TestLists(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /tasks/v1/users/@me/lists", 200, `{"items":[{"id":"L1","title":"My Tasks","updated":"2026-03-01T09:00:00.000Z","etag":"x","selfLink":"y"}]}`)
	f.On("POST /tasks/v1/users/@me/lists", 200, `{"id":"L2","title":"Groceries"}`)
	f.On("DELETE /tasks/v1/users/@me/lists/L2", 204, ``)
	out := decode(t, run(t, f.Client(), "tasks_lists", `{"action":"list"}`))
	check(t, "lists", out["lists"], []any{map[string]any{"id": "L1", "title": "My Tasks", "updated": "2026-03-01T09:00:00.000Z"}})
	check(t, "maxResults", f.Last("GET /tasks/v1/users/@me/lists").Query.Get("maxResults"), "100")
	out = decode(t, run(t, f.Client(), "tasks_lists", `{"action":"create","title":" Groceries "}`))
	check(t, "created", out["list"], map[string]any{"id": "L2", "title": "Groceries"})
	check(t, "title sent", body(t, f.Last("POST /tasks/v1/users/@me/lists"))["title"], "Groceries")
	out = decode(t, run(t, f.Client(), "tasks_lists", `{"action":"delete","list_id":"L2"}`))
	check(t, "deleted", out["status"], "deleted")
	googletest.WantError(t, run(t, f.Client(), "tasks_lists", `{"action":"rename"}`), tools.CodeInvalidArgument, "allowed_values")
	googletest.WantError(t, run(t, f.Client(), "tasks_lists", `{"action":"create"}`), tools.CodeMissingParameter, "title")
}

func TestListTasksWithDueFilters(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /tasks/v1/lists/@default/tasks", 200, `{"items":[
		{"id":"t1","title":"Pay rent","due":"2026-03-14T00:00:00.000Z","status":"needsAction","etag":"e"},
		{"id":"t2","title":"Call Ana","status":"completed","completed":"2026-03-02T10:00:00.000Z","parent":"t1"}],
		"nextPageToken":"p2"}`)
	out := decode(t, run(t, f.Client(), "tasks_list", `{"due_after":"2026-03-01","due_before":"2026-03-31","show_completed":true}`))
	check(t, "tasks", out["tasks"], []any{
		map[string]any{"id": "t1", "title": "Pay rent", "due": "2026-03-14", "done": false},
		map[string]any{"id": "t2", "title": "Call Ana", "done": true, "completed": "2026-03-02T10:00:00.000Z", "parent": "t1"},
	})
	check(t, "next", out["next_page_token"], "p2")
	q := f.Last("GET /tasks/v1/lists/@default/tasks").Query
	check(t, "dueMin", q.Get("dueMin"), "2026-03-01T00:00:00Z")
	check(t, "dueMax", q.Get("dueMax"), "2026-04-01T00:00:00Z")
	check(t, "showCompleted", q.Get("showCompleted"), "true")
	googletest.WantError(t, run(t, f.Client(), "tasks_list", `{"due_before":"next week"}`), tools.CodeInvalidArgument, "due_before")
}

func TestCreateUpdateMoveDelete(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("POST /tasks/v1/lists/L1/tasks", 200, `{"id":"t3","title":"Buy milk","due":"2026-03-14T00:00:00.000Z","status":"needsAction","parent":"t1"}`)
	f.On("PATCH /tasks/v1/lists/@default/tasks/t3", 200, `{"id":"t3","title":"Buy milk","status":"completed","completed":"2026-03-03T08:00:00.000Z"}`)
	f.On("POST /tasks/v1/lists/@default/tasks/t3/move", 200, `{"id":"t3","title":"Buy milk","status":"needsAction"}`)
	f.On("DELETE /tasks/v1/lists/@default/tasks/t3", 204, ``)
	out := decode(t, run(t, f.Client(), "tasks_create", `{"list_id":"L1","title":"Buy milk","notes":"2 litres","due":"2026-03-14","parent":"t1"}`))
	check(t, "task", out["task"], map[string]any{"id": "t3", "title": "Buy milk", "due": "2026-03-14", "done": false, "parent": "t1"})
	r := f.Last("POST /tasks/v1/lists/L1/tasks")
	b := body(t, r)
	check(t, "sent", []any{b["title"], b["notes"], b["due"], r.Query.Get("parent")}, []any{"Buy milk", "2 litres", "2026-03-14T00:00:00Z", "t1"})

	out = decode(t, run(t, f.Client(), "tasks_update", `{"task_id":"t3","done":true,"notes":""}`))
	check(t, "done", out["task"].(map[string]any)["done"], true)
	b = body(t, f.Last("PATCH /tasks/v1/lists/@default/tasks/t3"))
	check(t, "patch", []any{b["status"], b["notes"], b["title"]}, []any{"completed", nil, nil})
	if _, ok := b["notes"]; !ok {
		t.Errorf("notes were not cleared: %v", b)
	}
	if _, ok := b["completed"]; ok {
		t.Errorf("completing sent a completion time: %v", b)
	}
	// Reopening clears the completion time.
	decode(t, run(t, f.Client(), "tasks_update", `{"task_id":"t3","done":false}`))
	b = body(t, f.Last("PATCH /tasks/v1/lists/@default/tasks/t3"))
	if v, ok := b["completed"]; b["status"] != "needsAction" || !ok || v != nil {
		t.Errorf("reopening sent %v", b)
	}

	decode(t, run(t, f.Client(), "tasks_move", `{"task_id":"t3","previous":"t1"}`))
	q := f.Last("POST /tasks/v1/lists/@default/tasks/t3/move").Query
	check(t, "move", []any{q.Get("previous"), q.Get("parent")}, []any{"t1", ""})

	check(t, "deleted", decode(t, run(t, f.Client(), "tasks_delete", `{"task_id":"t3"}`))["status"], "deleted")
	if d := g(t).EffectOf("tasks_delete"); d != tools.EffectDestructive {
		t.Errorf("delete effect = %v", d)
	}
}

type groupView struct{ google.Group }

func g(t *testing.T) groupView { return groupView{tasks.New(&googletest.Client{}, tasks.Options{})} }

func (v groupView) EffectOf(name string) tools.Effect {
	for _, tl := range v.Tools {
		if tl.Name == name {
			return tools.EffectOf(context.Background(), tl.Definition, nil)
		}
	}
	return -1
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "DELETE /tasks/v1/lists/@default/tasks/t9", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "forbidden", Code: tools.CodePermission, Tries: 1},
		{Name: "server error", Status: 503, Reason: "backendError", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "bad request", Status: 400, Reason: "invalid", Code: tools.CodeInvalidArgument, Tries: 1},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "tasks_delete", `{"task_id":"t9"}`)
	})
}
