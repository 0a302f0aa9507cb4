package calendar_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"loadout/google"
	"loadout/google/calendar"
	"loadout/google/googletest"
	"loadout/tools"
)

const user = "telegram:1"

// run calls one tool through a registry and executor, as the engine does.
func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, calendar.New(c, calendar.Options{Backoff: googletest.Backoff, Now: clock}), user, name, args)
}

var (
	decode    = googletest.Decode
	wantError = googletest.WantError
	check     = googletest.Check
	jsonBody  = googletest.Body
)

// clock is the tests' now: Monday 3 March 2025, 10:00 UTC.
func clock() time.Time { return time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC) }

// path returns m's value at a dotted path.
func path(m map[string]any, p string) any {
	var v any = m
	for _, k := range strings.Split(p, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

const teamSync = `{
 "kind": "calendar#event",
 "etag": "\"3181161784712000\"",
 "id": "ev1",
 "status": "confirmed",
 "htmlLink": "https://www.google.com/calendar/event?eid=ZXYxIGFuYUBleGFtcGxl",
 "created": "2025-02-20T09:00:00.000Z",
 "updated": "2025-02-21T09:00:00.000Z",
 "summary": "Team sync",
 "description": "Weekly status",
 "location": "Room 4",
 "creator": {"email": "ana@example.com", "self": true},
 "organizer": {"email": "bo@example.com", "displayName": "Bo Chen"},
 "start": {"dateTime": "2025-03-04T10:00:00+01:00", "timeZone": "Europe/Berlin"},
 "end": {"dateTime": "2025-03-04T10:30:00+01:00", "timeZone": "Europe/Berlin"},
 "recurrence": ["RRULE:FREQ=WEEKLY;BYDAY=TU"],
 "iCalUID": "ev1@google.com",
 "sequence": 0,
 "attendees": [
  {"email": "bo@example.com", "displayName": "Bo Chen", "organizer": true, "responseStatus": "accepted"},
  {"email": "ana@example.com", "self": true, "responseStatus": "needsAction"},
  {"email": "cy@example.com", "responseStatus": "declined"}
 ],
 "hangoutLink": "https://meet.google.com/abc-defg-hij",
 "reminders": {"useDefault": false, "overrides": [{"method": "popup", "minutes": 10}]},
 "eventType": "default"
}`

func TestGroupDefinition(t *testing.T) {
	cg := calendar.New(&googletest.Client{}, calendar.Options{})
	g, ts := cg.Group, cg.Tools
	if g.Name != "google_calendar" || g.DisplayName == "" || g.Description == "" {
		t.Fatalf("group = %+v", g)
	}
	var names []string
	for _, tl := range ts {
		names = append(names, tl.Name)
		want := !strings.Contains(tl.Name, "create") && !strings.Contains(tl.Name, "update") && !strings.Contains(tl.Name, "delete")
		if tl.ReadOnly != want {
			t.Errorf("%s: ReadOnly = %v", tl.Name, tl.ReadOnly)
		}
	}
	check(t, "tools", strings.Join(names, " "), "calendar_list_calendars calendar_list_events calendar_get_event "+
		"calendar_create_event calendar_update_event calendar_delete_event calendar_freebusy")
}

func TestListCalendars(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/users/me/calendarList", func(r googletest.Request) (int, string) {
		check(t, "maxResults", r.Query.Get("maxResults"), "250")
		return 200, `{
 "kind": "calendar#calendarList", "etag": "\"p32g\"", "nextSyncToken": "CPj",
 "items": [
  {"kind": "calendar#calendarListEntry", "id": "ana@example.com", "summary": "ana@example.com", "timeZone": "Europe/Lisbon",
   "colorId": "14", "backgroundColor": "#9fe1e7", "selected": true, "accessRole": "owner", "primary": true,
   "defaultReminders": [{"method": "popup", "minutes": 10}]},
  {"kind": "calendar#calendarListEntry", "id": "en.portuguese#holiday@group.v.calendar.google.com", "summary": "Holidays in Portugal",
   "summaryOverride": "Feriados", "timeZone": "Europe/Lisbon", "accessRole": "reader"}
 ]
}`
	})
	m := decode(t, run(t, f.Client(), "calendar_list_calendars", `{}`))
	check(t, "calendars", m["calendars"], []any{
		map[string]any{"id": "ana@example.com", "name": "ana@example.com", "primary": true, "access": "owner", "time_zone": "Europe/Lisbon"},
		map[string]any{"id": "en.portuguese#holiday@group.v.calendar.google.com", "name": "Feriados", "access": "reader", "time_zone": "Europe/Lisbon"},
	})
}

func TestListEventsDefaults(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/calendars/primary/events", func(r googletest.Request) (int, string) {
		check(t, "singleEvents", r.Query.Get("singleEvents"), "true")
		check(t, "orderBy", r.Query.Get("orderBy"), "startTime")
		check(t, "timeMin", r.Query.Get("timeMin"), "2025-03-03T10:00:00Z")
		check(t, "timeMax", r.Query.Get("timeMax"), "2025-03-10T10:00:00Z")
		check(t, "timeZone", r.Query.Get("timeZone"), "")
		check(t, "maxResults", r.Query.Get("maxResults"), "50")
		return 200, `{
 "kind": "calendar#events", "summary": "ana@example.com", "timeZone": "Europe/Lisbon", "accessRole": "owner",
 "defaultReminders": [{"method": "popup", "minutes": 10}],
 "items": [` + teamSync + `,
  {"kind": "calendar#event", "id": "ev2", "status": "tentative", "summary": "Offsite",
   "htmlLink": "https://www.google.com/calendar/event?eid=ZXYy",
   "start": {"date": "2025-03-05"}, "end": {"date": "2025-03-07"}}
 ]
}`
	})
	m := decode(t, run(t, f.Client(), "calendar_list_events", `{}`))
	check(t, "from", m["from"], "2025-03-03T10:00:00Z")
	check(t, "to", m["to"], "2025-03-10T10:00:00Z")
	check(t, "time_zone", m["time_zone"], "Europe/Lisbon")
	events := m["events"].([]any)
	check(t, "first", events[0], map[string]any{"id": "ev1", "title": "Team sync",
		"start": "2025-03-04T10:00:00+01:00", "end": "2025-03-04T10:30:00+01:00", "location": "Room 4",
		"attendees": []any{"Bo Chen <bo@example.com> (accepted, organizer)", "ana@example.com (no reply, you)", "cy@example.com (declined)"},
		"meet":      "https://meet.google.com/abc-defg-hij"})
	check(t, "second", events[1], map[string]any{"id": "ev2", "title": "Offsite", "start": "2025-03-05", "end": "2025-03-06",
		"all_day": true, "status": "tentative"})
}

func TestListEventsLocalDatesUseCalendarZone(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/calendars/work@example.com", func(r googletest.Request) (int, string) {
		return 200, `{"kind":"calendar#calendar","id":"work@example.com","summary":"Work","timeZone":"America/New_York"}`
	})
	f.Handle("GET /calendar/v3/calendars/work@example.com/events", func(r googletest.Request) (int, string) {
		check(t, "timeMin", r.Query.Get("timeMin"), "2025-03-04T00:00:00-05:00")
		check(t, "timeMax", r.Query.Get("timeMax"), "2025-03-05T00:00:00-05:00")
		check(t, "timeZone", r.Query.Get("timeZone"), "America/New_York")
		check(t, "q", r.Query.Get("q"), "dentist")
		check(t, "pageToken", r.Query.Get("pageToken"), "p2")
		return 200, `{"kind":"calendar#events","timeZone":"America/New_York","items":[],"nextPageToken":"p3"}`
	})
	m := decode(t, run(t, f.Client(), "calendar_list_events",
		`{"calendar_id":"work@example.com","from":"2025-03-04","to":"2025-03-04","query":"dentist","page_token":"p2"}`))
	check(t, "from", m["from"], "2025-03-04T00:00:00-05:00")
	check(t, "events", m["events"], []any{})
	check(t, "next_page_token", m["next_page_token"], "p3")
}

func TestListEventsExplicitZone(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/calendars/primary/events", func(r googletest.Request) (int, string) {
		check(t, "timeMin", r.Query.Get("timeMin"), "2025-03-04T09:00:00+09:00")
		check(t, "timeMax", r.Query.Get("timeMax"), "2025-03-11T09:00:00+09:00")
		check(t, "timeZone", r.Query.Get("timeZone"), "Asia/Tokyo")
		return 200, `{"kind":"calendar#events","timeZone":"Europe/Lisbon","items":[]}`
	})
	m := decode(t, run(t, f.Client(), "calendar_list_events", `{"from":"2025-03-04T09:00","time_zone":"Asia/Tokyo"}`))
	check(t, "time_zone", m["time_zone"], "Asia/Tokyo")
	check(t, "calendar gets", f.Count("GET /calendar/v3/calendars/primary"), 0)
}

func TestListEventsValidation(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	wantError(t, run(t, f.Client(), "calendar_list_events", `{"from":"next tuesday"}`), tools.CodeInvalidArgument, "'from'")
	wantError(t, run(t, f.Client(), "calendar_list_events", `{"from":"2025-03-04T10:00:00Z","to":"2025-03-04T09:00:00Z"}`), tools.CodeInvalidArgument, "'to'")
	wantError(t, run(t, f.Client(), "calendar_list_events", `{"time_zone":"Mars/Olympus"}`), tools.CodeInvalidArgument, "time_zone")
	wantError(t, run(t, f.Client(), "calendar_list_events", `{"max_results":1000}`), tools.CodeInvalidArgument, "max_results")
}

func TestGetEvent(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) {
		check(t, "timeZone", r.Query.Get("timeZone"), "Europe/Berlin")
		return 200, teamSync
	})
	m := decode(t, run(t, f.Client(), "calendar_get_event", `{"event_id":"ev1","time_zone":"Europe/Berlin"}`))
	check(t, "title", m["title"], "Team sync")
	check(t, "link", m["link"], "https://www.google.com/calendar/event?eid=ZXYxIGFuYUBleGFtcGxl")
	check(t, "description", m["description"], "Weekly status")
	check(t, "organizer", m["organizer"], "Bo Chen <bo@example.com>")
	check(t, "reminders", m["reminders"], []any{"popup 10 min before"})
	check(t, "recurrence", m["recurrence"], []any{"RRULE:FREQ=WEEKLY;BYDAY=TU"})
	check(t, "time_zone", m["time_zone"], "Europe/Berlin")
	wantError(t, run(t, f.Client(), "calendar_get_event", `{}`), tools.CodeMissingParameter, "event_id")
}

var eventID = regexp.MustCompile(`^[0-9a-v]{26}$`)

func TestCreateTimedEvent(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /calendar/v3/calendars/primary/events", func(r googletest.Request) (int, string) {
		check(t, "sendUpdates", r.Query.Get("sendUpdates"), "all")
		check(t, "conferenceDataVersion", r.Query.Get("conferenceDataVersion"), "1")
		b := jsonBody(t, r)
		if !eventID.MatchString(fmt.Sprint(b["id"])) {
			t.Errorf("id = %v", b["id"])
		}
		check(t, "summary", b["summary"], "Design review")
		check(t, "start", b["start"], map[string]any{"dateTime": "2025-03-04T15:00:00+01:00", "timeZone": "Europe/Berlin"})
		check(t, "end", b["end"], map[string]any{"dateTime": "2025-03-04T16:00:00+01:00", "timeZone": "Europe/Berlin"})
		check(t, "attendees", b["attendees"], []any{map[string]any{"email": "bo@example.com"}})
		check(t, "reminders", b["reminders"], map[string]any{"useDefault": false, "overrides": []any{map[string]any{"method": "popup", "minutes": 10}}})
		check(t, "recurrence", b["recurrence"], []any{"RRULE:FREQ=WEEKLY;COUNT=4"})
		check(t, "meet", path(b, "conferenceData.createRequest.conferenceSolutionKey.type"), "hangoutsMeet")
		return 200, `{"kind":"calendar#event","id":"` + fmt.Sprint(b["id"]) + `","status":"confirmed",
 "htmlLink":"https://www.google.com/calendar/event?eid=bmV3","summary":"Design review",
 "start":{"dateTime":"2025-03-04T15:00:00+01:00","timeZone":"Europe/Berlin"},"end":{"dateTime":"2025-03-04T16:00:00+01:00","timeZone":"Europe/Berlin"},
 "attendees":[{"email":"bo@example.com","responseStatus":"needsAction"}],"recurrence":["RRULE:FREQ=WEEKLY;COUNT=4"],
 "organizer":{"email":"ana@example.com","self":true},
 "conferenceData":{"createRequest":{"requestId":"x","conferenceSolutionKey":{"type":"hangoutsMeet"},"status":{"statusCode":"pending"}},
  "entryPoints":[{"entryPointType":"video","uri":"https://meet.google.com/new-meet-abc"}]},
 "reminders":{"useDefault":false,"overrides":[{"method":"popup","minutes":10}]}}`
	})
	m := decode(t, run(t, f.Client(), "calendar_create_event", `{"title":"Design review","start":"2025-03-04T15:00",
 "time_zone":"Europe/Berlin","attendees":["bo@example.com"],"reminders":[10],"recurrence":"RRULE:FREQ=WEEKLY;COUNT=4","meet":true}`))
	check(t, "start", m["start"], "2025-03-04T15:00:00+01:00")
	check(t, "meet", m["meet"], "https://meet.google.com/new-meet-abc")
	check(t, "attendees", m["attendees"], []any{"bo@example.com (no reply)"})
	check(t, "organizer", m["organizer"], nil)
	check(t, "link", m["link"], "https://www.google.com/calendar/event?eid=bmV3")
}

func TestCreateAllDayEvent(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /calendar/v3/calendars/primary/events", func(r googletest.Request) (int, string) {
		check(t, "sendUpdates", r.Query.Get("sendUpdates"), "none")
		check(t, "conferenceDataVersion", r.Query.Get("conferenceDataVersion"), "")
		b := jsonBody(t, r)
		check(t, "start", b["start"], map[string]any{"date": "2025-03-05"})
		check(t, "end", b["end"], map[string]any{"date": "2025-03-08"})
		check(t, "reminders", b["reminders"], map[string]any{"useDefault": false, "overrides": []any{}})
		return 200, `{"kind":"calendar#event","id":"ad1","summary":"Holiday","start":{"date":"2025-03-05"},"end":{"date":"2025-03-08"},
 "reminders":{"useDefault":false}}`
	})
	m := decode(t, run(t, f.Client(), "calendar_create_event", `{"title":"Holiday","start":"2025-03-05","end":"2025-03-07","reminders":[],"send_updates":"none"}`))
	check(t, "span", [3]any{m["start"], m["end"], m["all_day"]}, [3]any{"2025-03-05", "2025-03-07", true})
	check(t, "reminders", m["reminders"], []any{"none"})
}

func TestCreateEventWithOffsetNeedsNoZone(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /calendar/v3/calendars/primary/events", func(r googletest.Request) (int, string) {
		b := jsonBody(t, r)
		check(t, "start", b["start"], map[string]any{"dateTime": "2025-03-04T15:00:00Z"})
		check(t, "end", b["end"], map[string]any{"dateTime": "2025-03-04T15:45:00Z"})
		check(t, "reminders", b["reminders"], nil)
		return 200, `{"id":"e5","summary":"Call","start":{"dateTime":"2025-03-04T15:00:00Z"},"end":{"dateTime":"2025-03-04T15:45:00Z"}}`
	})
	decode(t, run(t, f.Client(), "calendar_create_event", `{"title":"Call","start":"2025-03-04T15:00:00Z","end":"2025-03-04T15:45:00Z"}`))
}

func TestCreateEventRetriedInsertIsNotDuplicated(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	var ids []string
	f.Handle("POST /calendar/v3/calendars/primary/events", func(r googletest.Request) (int, string) {
		ids = append(ids, fmt.Sprint(jsonBody(t, r)["id"]))
		if len(ids) == 1 {
			return 503, googletest.ErrorBody(503, "backendError", "Backend Error")
		}
		return 409, googletest.ErrorBody(409, "duplicate", "The requested identifier already exists.")
	})
	f.Handle("GET /calendar/v3/calendars/primary/events/*", func(r googletest.Request) (int, string) {
		got := strings.TrimPrefix(r.Path, "/calendar/v3/calendars/primary/events/")
		if len(ids) != 2 || got != ids[0] || ids[1] != ids[0] {
			t.Errorf("fetched %s after inserts %v", got, ids)
		}
		return 200, `{"id":"` + got + `","summary":"Lunch","start":{"dateTime":"2025-03-04T12:00:00Z"},"end":{"dateTime":"2025-03-04T13:00:00Z"}}`
	})
	m := decode(t, run(t, f.Client(), "calendar_create_event", `{"title":"Lunch","start":"2025-03-04T12:00:00Z"}`))
	check(t, "title", m["title"], "Lunch")
	check(t, "inserts", len(ids), 2)
}

func TestCreateEventValidation(t *testing.T) {
	f := googletest.NewStrictAPI(t, user) // any request fails the test
	for _, tc := range []struct{ args, code, contains string }{
		{`{"title":"x","start":"tomorrow 3pm"}`, tools.CodeInvalidArgument, "'start'"},
		{`{"title":"x","start":"2025-03-04T10:00:00Z","end":"2025-03-05"}`, tools.CodeInvalidArgument, "'end'"},
		{`{"title":"x","start":"2025-03-04T10:00:00Z","end":"2025-03-04T09:00:00Z"}`, tools.CodeInvalidArgument, "'end'"},
		{`{"title":"x","start":"2025-03-04","end":"2025-03-03"}`, tools.CodeInvalidArgument, "'end'"},
		{`{"title":"x","start":"2025-03-04","attendees":["bo at example"]}`, tools.CodeInvalidArgument, "'attendees'"},
		{`{"title":"x","start":"2025-03-04","reminders":[50000]}`, tools.CodeInvalidArgument, "'reminders'"},
		{`{"title":"x","start":"2025-03-04","recurrence":"FREQ=DAILY"}`, tools.CodeInvalidArgument, "'recurrence'"},
		{`{"title":"x","start":"2025-03-04","time_zone":"CET+1"}`, tools.CodeInvalidArgument, "'time_zone'"},
		{`{"title":"x","start":"2025-03-04","send_updates":"everyone"}`, tools.CodeInvalidArgument, "send_updates"},
		{`{"title":" ","start":"2025-03-04"}`, tools.CodeInvalidArgument, "'title'"},
		{`{"start":"2025-03-04"}`, tools.CodeMissingParameter, "title"},
	} {
		wantError(t, run(t, f.Client(), "calendar_create_event", tc.args), tc.code, tc.contains)
	}
}

func TestUpdateEventMovesAndKeepsDuration(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) { return 200, teamSync })
	f.Handle("PATCH /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) {
		check(t, "sendUpdates", r.Query.Get("sendUpdates"), "externalOnly")
		b := jsonBody(t, r)
		check(t, "summary", b["summary"], "Team sync (moved)")
		check(t, "location", b["location"], "")
		check(t, "start", b["start"], map[string]any{"date": nil, "dateTime": "2025-03-05T14:00:00+01:00", "timeZone": "Europe/Berlin"})
		check(t, "end", b["end"], map[string]any{"date": nil, "dateTime": "2025-03-05T14:30:00+01:00", "timeZone": "Europe/Berlin"})
		check(t, "attendees", b["attendees"], []any{
			map[string]any{"email": "bo@example.com", "displayName": "Bo Chen", "organizer": true, "responseStatus": "accepted"},
			map[string]any{"email": "ana@example.com", "self": true, "responseStatus": "needsAction"},
			map[string]any{"email": "dee@example.com"},
		})
		if _, ok := b["description"]; ok {
			t.Errorf("description sent though not given: %v", b["description"])
		}
		return 200, strings.Replace(teamSync, `"summary": "Team sync"`, `"summary": "Team sync (moved)"`, 1)
	})
	m := decode(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","title":"Team sync (moved)","location":"",
 "start":"2025-03-05T14:00","add_attendees":["dee@example.com","bo@example.com"],"remove_attendees":["CY@example.com"],"send_updates":"external"}`))
	check(t, "title", m["title"], "Team sync (moved)")
	check(t, "calendar gets", f.Count("GET /calendar/v3/calendars/primary"), 0)
}

func TestUpdateEventToAllDay(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) { return 200, teamSync })
	f.Handle("PATCH /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) {
		check(t, "conferenceDataVersion", r.Query.Get("conferenceDataVersion"), "")
		b := jsonBody(t, r)
		check(t, "start", b["start"], map[string]any{"date": "2025-03-06", "dateTime": nil, "timeZone": nil})
		check(t, "end", b["end"], map[string]any{"date": "2025-03-07", "dateTime": nil, "timeZone": nil})
		check(t, "reminders", b["reminders"], map[string]any{"useDefault": false, "overrides": []any{}})
		return 200, `{"id":"ev1","summary":"Team sync","start":{"date":"2025-03-06"},"end":{"date":"2025-03-07"}}`
	})
	m := decode(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","start":"2025-03-06","reminders":[],"meet":true}`))
	check(t, "span", [2]any{m["start"], m["end"]}, [2]any{"2025-03-06", "2025-03-06"})
}

func TestUpdateEventValidation(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	wantError(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1"}`), tools.CodeMissingParameter, "Nothing to change")
	wantError(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","start":"5pm"}`), tools.CodeInvalidArgument, "'start'")
	wantError(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","add_attendees":["x"]}`), tools.CodeInvalidArgument, "'add_attendees'")
	f.Handle("GET /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) { return 200, teamSync })
	wantError(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","end":"2025-03-04"}`), tools.CodeInvalidArgument, "'end'")
	wantError(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","end":"2025-03-04T09:00:00+01:00"}`), tools.CodeInvalidArgument, "after start")
	check(t, "patches", f.Count("PATCH /calendar/v3/calendars/primary/events/ev1"), 0)
}

func TestDeleteEvent(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("DELETE /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) {
		check(t, "sendUpdates", r.Query.Get("sendUpdates"), "all")
		return 204, ""
	})
	f.Handle("DELETE /calendar/v3/calendars/primary/events/gone1", func(r googletest.Request) (int, string) {
		return 410, googletest.ErrorBody(410, "deleted", "Resource has been deleted")
	})
	m := decode(t, run(t, f.Client(), "calendar_delete_event", `{"event_id":"ev1"}`))
	check(t, "deleted", m["deleted"], true)
	wantError(t, run(t, f.Client(), "calendar_delete_event", `{"event_id":"gone1"}`), tools.CodeNotFound, "deleted")
}

func TestFreebusy(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /calendar/v3/freeBusy", func(r googletest.Request) (int, string) {
		check(t, "body", jsonBody(t, r), map[string]any{"timeMin": "2025-03-04T09:00:00+01:00", "timeMax": "2025-03-04T18:00:00+01:00",
			"timeZone": "Europe/Paris", "items": []any{map[string]any{"id": "primary"}, map[string]any{"id": "bo@example.com"}, map[string]any{"id": "zed@other.org"}}})
		return 200, `{
 "kind": "calendar#freeBusy", "timeMin": "2025-03-04T08:00:00.000Z", "timeMax": "2025-03-04T17:00:00.000Z",
 "calendars": {
  "primary": {"busy": [{"start": "2025-03-04T10:00:00+01:00", "end": "2025-03-04T10:30:00+01:00"}]},
  "bo@example.com": {"busy": []},
  "zed@other.org": {"errors": [{"domain": "global", "reason": "notFound"}], "busy": []}
 }
}`
	})
	m := decode(t, run(t, f.Client(), "calendar_freebusy", `{"calendars":["primary","bo@example.com","zed@other.org"],
 "from":"2025-03-04T09:00","to":"2025-03-04T18:00","time_zone":"Europe/Paris"}`))
	check(t, "calendars", m["calendars"], []any{
		map[string]any{"id": "primary", "busy": []any{map[string]any{"start": "2025-03-04T10:00:00+01:00", "end": "2025-03-04T10:30:00+01:00"}}},
		map[string]any{"id": "bo@example.com", "busy": []any{}},
		map[string]any{"id": "zed@other.org", "busy": []any{}, "error": "notFound"},
	})
	check(t, "from", m["from"], "2025-03-04T09:00:00+01:00")
}

func TestFreebusyDefaults(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /calendar/v3/freeBusy", func(r googletest.Request) (int, string) {
		check(t, "body", jsonBody(t, r), map[string]any{"timeMin": "2025-03-03T10:00:00Z", "timeMax": "2025-03-10T10:00:00Z",
			"items": []any{map[string]any{"id": "primary"}}})
		return 200, `{"kind":"calendar#freeBusy","calendars":{"primary":{"busy":[]}}}`
	})
	decode(t, run(t, f.Client(), "calendar_freebusy", `{}`))
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "GET /calendar/v3/calendars/primary/events/ev9", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "forbidden", Code: tools.CodePermission, Tries: 1},
		{Name: "rate limited", Status: 403, Reason: "rateLimitExceeded", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "too many requests", Status: 429, Reason: "rateLimitExceeded", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "server error", Status: 500, Reason: "backendError", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "bad request", Status: 400, Reason: "timeRangeEmpty", Code: tools.CodeInvalidArgument, Tries: 1},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "calendar_get_event", `{"event_id":"ev9"}`)
	})
}

func TestNotConnected(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	c := &googletest.Client{Endpoint: f.URL, Connected: map[string]bool{"telegram:2": true}}
	for _, call := range [][2]string{
		{"calendar_list_calendars", `{}`},
		{"calendar_list_events", `{}`},
		{"calendar_create_event", `{"title":"x","start":"2025-03-04"}`},
		{"calendar_freebusy", `{}`},
	} {
		wantError(t, run(t, c, call[0], call[1]), tools.CodeNotConnected, "/connect google")
	}
}

// A series' recurrence rule can be changed, or removed with "".
func TestUpdateEventRecurrence(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) { return 200, teamSync })
	var bodies []map[string]any
	f.Handle("PATCH /calendar/v3/calendars/primary/events/ev1", func(r googletest.Request) (int, string) {
		bodies = append(bodies, jsonBody(t, r))
		return 200, teamSync
	})
	decode(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","recurrence":"RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=6"}`))
	decode(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","recurrence":""}`))
	check(t, "new rule", bodies[0]["recurrence"], []any{"RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=6"})
	if v, ok := bodies[1]["recurrence"]; !ok || v != nil {
		t.Errorf("stopping the series sent recurrence %v (present %v)", v, ok)
	}
	wantError(t, run(t, f.Client(), "calendar_update_event", `{"event_id":"ev1","recurrence":"weekly"}`), tools.CodeInvalidArgument, "RRULE:")
}
