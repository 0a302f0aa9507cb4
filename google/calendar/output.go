package calendar

import (
	"fmt"
	"time"

	gcal "google.golang.org/api/calendar/v3"
)

// event is an event as list results show it.
type event struct {
	ID               string   `json:"id"`
	Title            string   `json:"title"`
	Start            string   `json:"start"`
	End              string   `json:"end"`
	AllDay           bool     `json:"all_day,omitempty"`
	Location         string   `json:"location,omitempty"`
	Attendees        []string `json:"attendees,omitempty"`
	Meet             string   `json:"meet,omitempty"`
	Status           string   `json:"status,omitempty"`
	RecurringEventID string   `json:"recurring_event_id,omitempty"`
}

// eventDetail is an event as get, create and update return it.
type eventDetail struct {
	event
	Link        string   `json:"link,omitempty"`
	Description string   `json:"description,omitempty"`
	Organizer   string   `json:"organizer,omitempty"`
	TimeZone    string   `json:"time_zone,omitempty"`
	Reminders   []string `json:"reminders,omitempty"`
	Recurrence  []string `json:"recurrence,omitempty"`
}

// eventFields is the partial response list results ask for.
const eventFields = "id,summary,start,end,location,attendees(email,displayName,responseStatus,self,organizer),hangoutLink,conferenceData,status,recurringEventId"

func toEvent(e *gcal.Event) event {
	out := event{ID: e.Id, Title: e.Summary, Location: e.Location, Meet: e.HangoutLink, RecurringEventID: e.RecurringEventId}
	if out.Title == "" {
		out.Title = "(no title)"
	}
	if e.Status != "" && e.Status != "confirmed" {
		out.Status = e.Status
	}
	if out.Meet == "" && e.ConferenceData != nil {
		for _, ep := range e.ConferenceData.EntryPoints {
			if ep.EntryPointType == "video" {
				out.Meet = ep.Uri
				break
			}
		}
	}
	out.Start, out.End, out.AllDay = span(e.Start, e.End)
	for _, a := range e.Attendees {
		s := a.Email
		if a.DisplayName != "" {
			s = a.DisplayName + " <" + a.Email + ">"
		}
		s += " (" + response(a.ResponseStatus)
		if a.Organizer {
			s += ", organizer"
		}
		if a.Self {
			s += ", you"
		}
		out.Attendees = append(out.Attendees, s+")")
	}
	return out
}

// span formats an event's start and end; an all-day event's end is its
// last day, not the API's exclusive next day.
func span(start, end *gcal.EventDateTime) (string, string, bool) {
	if start == nil || end == nil {
		return "", "", false
	}
	if start.Date != "" {
		last := end.Date
		if t, err := time.Parse(time.DateOnly, end.Date); err == nil {
			last = t.AddDate(0, 0, -1).Format(time.DateOnly)
		}
		return start.Date, last, true
	}
	return start.DateTime, end.DateTime, false
}

func response(s string) string {
	if s == "needsAction" {
		return "no reply"
	}
	return s
}

func toDetail(e *gcal.Event) eventDetail {
	d := eventDetail{event: toEvent(e), Link: e.HtmlLink, Description: e.Description, Recurrence: e.Recurrence}
	if e.Start != nil {
		d.TimeZone = e.Start.TimeZone
	}
	if o := e.Organizer; o != nil && !o.Self {
		d.Organizer = o.Email
		if o.DisplayName != "" {
			d.Organizer = o.DisplayName + " <" + o.Email + ">"
		}
	}
	if r := e.Reminders; r != nil {
		if r.UseDefault {
			d.Reminders = []string{"calendar default"}
		}
		for _, o := range r.Overrides {
			d.Reminders = append(d.Reminders, fmt.Sprintf("%s %d min before", o.Method, o.Minutes))
		}
		if !r.UseDefault && len(r.Overrides) == 0 {
			d.Reminders = []string{"none"}
		}
	}
	return d
}
