package calendar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"time"

	gcal "google.golang.org/api/calendar/v3"
	"google.golang.org/api/googleapi"

	"loadout/google"
	"loadout/tools"
)

type createEventIn struct {
	CalendarID  string   `json:"calendar_id,omitempty" desc:"default primary"`
	Title       string   `json:"title"`
	Start       string   `json:"start" desc:"RFC3339, local date-time in time_zone, or a date for an all-day event"`
	End         string   `json:"end,omitempty" desc:"same form as start; all-day: the last day; default 1 hour or 1 day"`
	TimeZone    string   `json:"time_zone,omitempty" desc:"IANA zone; default the calendar's"`
	Location    string   `json:"location,omitempty"`
	Description string   `json:"description,omitempty"`
	Attendees   []string `json:"attendees,omitempty" desc:"emails to invite" reach:"recipients"`
	Reminders   []int    `json:"reminders,omitempty" desc:"popup reminders in minutes before; [] for none; omit for the calendar default"`
	Recurrence  string   `json:"recurrence,omitempty" desc:"e.g. RRULE:FREQ=WEEKLY;COUNT=4"`
	Meet        bool     `json:"meet,omitempty" desc:"add a Google Meet link"`
	SendUpdates string   `json:"send_updates,omitempty" desc:"who is emailed; default all" enum:"all,external,none"`
}

// invites is the effect of a change that may email n attendees: it goes
// to other people unless send_updates is none.
func invites(n int, sendUpdates string) tools.Effect {
	if n > 0 && sendUpdates != "none" {
		return tools.EffectDestructive
	}
	return tools.EffectMutate
}

// onCalendar names a calendar other than the person's own for a summary:
// " on the calendar 'team@…'".
func onCalendar(id string) string {
	if id = calendarID(id); id == "primary" {
		return ""
	}
	return fmt.Sprintf(" on the calendar '%s'", id)
}

// event reads an event once per call: the summary of a change names who
// is emailed about it, and the change itself starts from it.
func (g *group) event(ctx context.Context, calendar, id string) (*gcal.Event, error) {
	calID, id := calendarID(calendar), strings.TrimSpace(id)
	return tools.Once(ctx, "calendar.event "+calID+" "+id, func() (*gcal.Event, error) {
		return google.Do(ctx, g.api, eventWhat(id), func(svc *gcal.Service) (*gcal.Event, error) {
			return svc.Events.Get(calID, id).Context(ctx).Do()
		})
	})
}

// attendees names who is emailed about a change to an event, for its
// summary: "its attendees ana@example.com, bob@example.com", or "its
// attendees" when the event cannot be read (the change then fails too).
func (g *group) attendees(ctx context.Context, calendar, id string) string {
	ev, err := g.event(ctx, calendar, id)
	if err != nil || ev == nil {
		return "its attendees"
	}
	var who []string
	for _, a := range ev.Attendees {
		if a.Email != "" && !a.Self {
			who = append(who, a.Email)
		}
	}
	if len(who) == 0 {
		return "its attendees (it has none yet)"
	}
	return "its attendees " + tools.Names(who, 5)
}

// mailed is the reach of a change to an event that emails its
// attendees (send_updates other than none): each of them but the
// person.
func (g *group) mailed(ctx context.Context, calendar, id, sendUpdates string) tools.Reach {
	if sendUpdates == "none" {
		return tools.Reach{}
	}
	ev, err := g.event(ctx, calendar, id)
	if err != nil || ev == nil {
		return tools.UnknownReach("who the event's attendees are could not be read")
	}
	var who []string
	for _, a := range ev.Attendees {
		if a.Email != "" && !a.Self {
			who = append(who, a.Email)
		}
	}
	return tools.AddressReach(who...)
}

func (g *group) createEvent(ctx context.Context, in createEventIn) (any, error) {
	calID := calendarID(in.CalendarID)
	title := strings.TrimSpace(in.Title)
	if title == "" {
		return nil, google.Invalid("title", "is empty")
	}
	zone, err := zoneParam(in.TimeZone)
	if err != nil {
		return nil, err
	}
	start, err := parseMoment("start", in.Start)
	if err != nil {
		return nil, err
	}
	var end *moment
	if strings.TrimSpace(in.End) != "" {
		m, err := parseMoment("end", in.End)
		if err != nil {
			return nil, err
		}
		if m.date != start.date {
			return nil, google.Invalid("end", "must be a date when start is a date, and a time when start is a time")
		}
		end = &m
	}
	attendees, err := attendeeList("attendees", in.Attendees)
	if err != nil {
		return nil, err
	}
	reminders, err := reminderList(in.Reminders)
	if err != nil {
		return nil, err
	}
	updates, err := sendUpdates(in.SendUpdates)
	if err != nil {
		return nil, err
	}
	rrule := strings.TrimSpace(in.Recurrence)
	if rrule != "" && !strings.HasPrefix(rrule, "RRULE:") {
		return nil, google.Invalid("recurrence", "must start with RRULE:, e.g. RRULE:FREQ=WEEKLY;COUNT=4")
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ev := &gcal.Event{Summary: title, Location: in.Location, Description: in.Description, Reminders: reminders}
	for _, a := range attendees {
		ev.Attendees = append(ev.Attendees, &gcal.EventAttendee{Email: a})
	}
	if rrule != "" {
		ev.Recurrence = []string{rrule}
	}
	if start.date {
		last := start
		if end != nil {
			last = *end
		}
		if last.t.Before(start.t) {
			return nil, google.Invalid("end", "must not be before start")
		}
		ev.Start = &gcal.EventDateTime{Date: start.day()}
		ev.End = &gcal.EventDateTime{Date: last.t.AddDate(0, 0, 1).Format(time.DateOnly)}
	} else {
		// Recurring events need a zone to expand in; local times need
		// one to mean anything.
		var loc *time.Location
		if zone != "" || start.local || (end != nil && end.local) || rrule != "" {
			if loc, err = g.zoneFor(ctx, svc, calID, zone); err != nil {
				return nil, err
			}
		}
		s := start.in(loc)
		e := s.Add(time.Hour)
		if end != nil {
			e = end.in(loc)
		}
		if !e.After(s) {
			return nil, google.Invalid("end", "must be after start")
		}
		ev.Start, ev.End = timed(s, loc), timed(e, loc)
	}
	// A chosen id makes a retried insert that had in fact succeeded
	// come back as 409, and the event is then fetched instead.
	ev.Id = randomID(26)
	c := svc.Events.Insert(calID, ev).SendUpdates(updates)
	if in.Meet {
		ev.ConferenceData = meetRequest()
		c.ConferenceDataVersion(1)
	}
	retried := false
	var out *gcal.Event
	err = google.Retry(ctx, g.opts.Backoff, func() error {
		defer func() { retried = true }()
		out, err = c.Context(ctx).Do()
		if isConflict(err) && retried {
			out, err = svc.Events.Get(calID, ev.Id).Context(ctx).Do()
		}
		return err
	})
	if err != nil {
		return nil, mapError(err, calendarWhat(calID))
	}
	return toDetail(out), nil
}

func isConflict(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusConflict
}

// timed is an EventDateTime at t, in loc when there is one.
func timed(t time.Time, loc *time.Location) *gcal.EventDateTime {
	if loc == nil {
		return &gcal.EventDateTime{DateTime: t.Format(time.RFC3339)}
	}
	return &gcal.EventDateTime{DateTime: t.In(loc).Format(time.RFC3339), TimeZone: loc.String()}
}

func meetRequest() *gcal.ConferenceData {
	return &gcal.ConferenceData{CreateRequest: &gcal.CreateConferenceRequest{
		RequestId: randomID(20), ConferenceSolutionKey: &gcal.ConferenceSolutionKey{Type: "hangoutsMeet"}}}
}

// attendeeList validates email addresses.
func attendeeList(param string, in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, s := range in {
		s = strings.TrimSpace(s)
		a, err := mail.ParseAddress(s)
		if err != nil || a.Address != s {
			return nil, google.Invalid(param, fmt.Sprintf("has '%s', which is not an email address", s))
		}
		out = append(out, s)
	}
	return out, nil
}

// reminderList turns minutes into popup reminders: nil keeps the
// calendar's default, an empty list means none.
func reminderList(minutes []int) (*gcal.EventReminders, error) {
	if minutes == nil {
		return nil, nil
	}
	if len(minutes) > 5 {
		return nil, google.Invalid("reminders", "may hold at most 5 reminders")
	}
	r := &gcal.EventReminders{ForceSendFields: []string{"UseDefault", "Overrides"}, Overrides: []*gcal.EventReminder{}}
	for _, m := range minutes {
		if m < 0 || m > 40320 {
			return nil, google.Invalid("reminders", "minutes must be between 0 and 40320 (4 weeks)")
		}
		r.Overrides = append(r.Overrides, &gcal.EventReminder{Method: "popup", Minutes: int64(m), ForceSendFields: []string{"Minutes"}})
	}
	return r, nil
}
