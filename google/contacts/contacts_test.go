package contacts_test

import (
	"testing"

	"loadout/google"
	"loadout/google/contacts"
	"loadout/google/googletest"
	"loadout/tools"
)

const user = "telegram:1"

func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, contacts.New(c, contacts.Options{Backoff: googletest.Backoff}), user, name, args)
}

var (
	decode = googletest.Decode
	check  = googletest.Check
	body   = googletest.Body
)

const ana = `{"resourceName":"people/c1","etag":"%EgcBAgkLLjc9GgQBAgUHIgxQ",
 "names":[{"displayName":"Ana Lima","givenName":"Ana"}],
 "emailAddresses":[{"value":"ana@example.com","type":"work"}],
 "phoneNumbers":[{"value":"+351 912 345 678"}],
 "organizations":[{"name":"Acme","title":"Engineer"}],
 "biographies":[{"value":"Met at the conference"}],
 "memberships":[{"contactGroupMembership":{"contactGroupResourceName":"contactGroups/myContacts"}},{"contactGroupMembership":{"contactGroupResourceName":"contactGroups/friends"}}]}`

var anaOut = map[string]any{"resource_name": "people/c1", "name": "Ana Lima", "emails": []any{"ana@example.com"},
	"phones": []any{"+351 912 345 678"}, "organization": "Acme", "title": "Engineer", "notes": "Met at the conference",
	"groups": []any{"contactGroups/friends"}}

func TestGroup(t *testing.T) {
	g := contacts.New(&googletest.Client{}, contacts.Options{})
	check(t, "name", g.Name, "google_contacts")
	check(t, "scopes", g.Scopes, []string{"https://www.googleapis.com/auth/contacts"})
	if len(g.Tools) > 10 {
		t.Fatalf("%d tools", len(g.Tools))
	}
}

func TestSearchListGet(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /people/v1/people:searchContacts", 200, `{"results":[{"person":`+ana+`}]}`)
	f.On("GET /people/v1/people/me/connections", 200, `{"connections":[`+ana+`],"totalPeople":41,"nextPageToken":"n2"}`)
	f.On("GET /people/v1/people/c1", 200, ana)
	out := decode(t, run(t, f.Client(), "contacts_search", `{"query":"ana"}`))
	check(t, "search", out["contacts"], []any{anaOut})
	q := f.Last("GET /people/v1/people:searchContacts").Query
	check(t, "query", []any{q.Get("query"), q.Get("pageSize"), q.Get("readMask") != ""}, []any{"ana", "10", true})

	out = decode(t, run(t, f.Client(), "contacts_list", `{"page_size":20,"page_token":"p1"}`))
	check(t, "list", []any{out["total"], out["next_page_token"], len(out["contacts"].([]any))}, []any{41, "n2", 1})
	q = f.Last("GET /people/v1/people/me/connections").Query
	check(t, "list query", []any{q.Get("pageSize"), q.Get("pageToken"), q.Get("sortOrder")}, []any{"20", "p1", "FIRST_NAME_ASCENDING"})

	// Asking for more than the most gives the most, not the default.
	run(t, f.Client(), "contacts_search", `{"query":"ana","limit":50}`)
	run(t, f.Client(), "contacts_list", `{"page_size":500}`)
	check(t, "largest pages", []any{f.Last("GET /people/v1/people:searchContacts").Query.Get("pageSize"),
		f.Last("GET /people/v1/people/me/connections").Query.Get("pageSize")}, []any{"30", "200"})

	check(t, "get", decode(t, run(t, f.Client(), "contacts_get", `{"resource_name":"people/c1"}`)), anaOut)
	// A name that is not a contact's never reaches Google.
	googletest.WantError(t, run(t, f.Client(), "contacts_get", `{"resource_name":"people/me/connections"}`), tools.CodeInvalidArgument, "resource_name")
	googletest.WantError(t, run(t, f.Client(), "contacts_get", `{"resource_name":"contactGroups/x"}`), tools.CodeInvalidArgument, "resource_name")
}

func TestCreateUpdateDelete(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("POST /people/v1/people:createContact", 200, `{"resourceName":"people/c2","names":[{"displayName":"Bob Ng"}],"emailAddresses":[{"value":"bob@example.com"}]}`)
	f.On("GET /people/v1/people/c1", 200, ana)
	f.On("PATCH /people/v1/people/c1:updateContact", 200, ana)
	f.On("DELETE /people/v1/people/c1:deleteContact", 200, `{}`)
	out := decode(t, run(t, f.Client(), "contacts_create", `{"name":"Bob Ng","emails":["bob@example.com"],"notes":"plumber"}`))
	check(t, "created", out["contact"], map[string]any{"resource_name": "people/c2", "name": "Bob Ng", "emails": []any{"bob@example.com"}})
	sent := body(t, f.Last("POST /people/v1/people:createContact"))
	check(t, "create body", []any{sent["names"], sent["emailAddresses"], sent["biographies"]}, []any{
		[]any{map[string]any{"unstructuredName": "Bob Ng"}}, []any{map[string]any{"value": "bob@example.com"}},
		[]any{map[string]any{"value": "plumber", "contentType": "TEXT_PLAIN"}}})
	googletest.WantError(t, run(t, f.Client(), "contacts_create", `{"organization":"Acme"}`), tools.CodeMissingParameter, "at least")

	decode(t, run(t, f.Client(), "contacts_update", `{"resource_name":"people/c1","phones":["+351 900 000 000"],"title":"Lead"}`))
	r := f.Last("PATCH /people/v1/people/c1:updateContact")
	check(t, "updatePersonFields", r.Query.Get("updatePersonFields"), "phoneNumbers,organizations")
	sent = body(t, r)
	check(t, "update body", []any{sent["etag"], sent["phoneNumbers"], sent["organizations"]}, []any{"%EgcBAgkLLjc9GgQBAgUHIgxQ",
		[]any{map[string]any{"value": "+351 900 000 000"}}, []any{map[string]any{"name": "Acme", "title": "Lead"}}})
	googletest.WantError(t, run(t, f.Client(), "contacts_update", `{"resource_name":"people/c1"}`), tools.CodeMissingParameter, "Nothing to change")

	check(t, "deleted", decode(t, run(t, f.Client(), "contacts_delete", `{"resource_name":"people/c1"}`))["status"], "deleted")
}

func TestContactGroups(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /people/v1/contactGroups", 200, `{"contactGroups":[
		{"resourceName":"contactGroups/myContacts","name":"myContacts","formattedName":"My Contacts","groupType":"SYSTEM_CONTACT_GROUP","memberCount":41},
		{"resourceName":"contactGroups/friends","name":"Friends","groupType":"USER_CONTACT_GROUP","memberCount":7}]}`)
	out := decode(t, run(t, f.Client(), "contacts_groups", `{}`))
	check(t, "groups", out["groups"], []any{
		map[string]any{"resource_name": "contactGroups/myContacts", "name": "My Contacts", "members": 41, "system": true},
		map[string]any{"resource_name": "contactGroups/friends", "name": "Friends", "members": 7},
	})
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "GET /people/v1/people/c9", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "forbidden", Code: tools.CodePermission, Tries: 1},
		{Name: "rate limited", Status: 429, Reason: "rateLimitExceeded", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "bad request", Status: 400, Reason: "badRequest", Code: tools.CodeInvalidArgument, Tries: 1},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "contacts_get", `{"resource_name":"people/c9"}`)
	})
}
