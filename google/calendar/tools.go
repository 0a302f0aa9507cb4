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

type calendarOut struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Primary  bool   `json:"primary,omitempty"`
	Access   string `json:"access"`
	TimeZone string `json:"time_zone,omitempty"`
}

type noInput struct{}

func (g *group) listCalendars() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "calendar_list_calendars",
		Description: "List the person's calendars with their ids, names, access roles and time zones.",
		ReadOnly:    true, Untrusted: true,
	}, func(ctx context.Context, _ noInput) (any, error) {
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		var out []calendarOut
		token := ""
		for page := 0; page < 4; page++ {
			var res *gcal.CalendarList
			err = g.api.Call(ctx, "the calendar list", func() error {
				c := svc.CalendarList.List().Context(ctx).MaxResults(250).
					Fields("nextPageToken", "items(id,summary,summaryOverride,primary,accessRole,timeZone)")
				if token != "" {
					c.PageToken(token)
				}
				res, err = c.Do()
				return err
			})
			if err != nil {
				return nil, err
			}
			for _, c := range res.Items {
				name := c.SummaryOverride
				if name == "" {
					name = c.Summary
				}
				out = append(out, calendarOut{ID: c.Id, Name: name, Primary: c.Primary, Access: c.AccessRole, TimeZone: c.TimeZone})
			}
			if token = res.NextPageToken; token == "" {
				break
			}
		}
		return map[string]any{"calendars": out}, nil
	})
}

// resolveRange resolves from/to arguments: defaults from now to 7 days on, and
// a date as "to" includes that day. loc is resolved only when an argument
// needs it or zone is set.
func (g *group) resolveRange(ctx context.Context, svc *gcal.Service, calID, zone, from, to string) (time.Time, time.Time, *time.Location, error) {
	var fm, tm *moment
	if strings.TrimSpace(from) != "" {
		m, err := parseMoment("from", from)
		if err != nil {
			return time.Time{}, time.Time{}, nil, err
		}
		fm = &m
	}
	if strings.TrimSpace(to) != "" {
		m, err := parseMoment("to", to)
		if err != nil {
			return time.Time{}, time.Time{}, nil, err
		}
		tm = &m
	}
	var loc *time.Location
	if zone != "" || g.opts.TimeZone != "" || (fm != nil && fm.local) || (tm != nil && tm.local) {
		var err error
		if loc, err = g.zoneFor(ctx, svc, calID, zone); err != nil {
			return time.Time{}, time.Time{}, nil, err
		}
	}
	start := g.opts.Now()
	if fm != nil {
		start = fm.in(loc)
	}
	end := start.AddDate(0, 0, 7)
	if tm != nil {
		end = tm.in(loc)
		if tm.date {
			end = end.AddDate(0, 0, 1)
		}
	}
	if !end.After(start) {
		return time.Time{}, time.Time{}, nil, google.Invalid("to", "must be after 'from' (which defaults to now)")
	}
	return start, end, loc, nil
}

func stamp(t time.Time, loc *time.Location) string {
	if loc != nil {
		t = t.In(loc)
	}
	return t.Format(time.RFC3339)
}

type listEventsIn struct {
	CalendarID string `json:"calendar_id,omitempty" desc:"default primary"`
	From       string `json:"from,omitempty" desc:"RFC3339, or local date/time in time_zone; default now"`
	To         string `json:"to,omitempty" desc:"same forms; a date includes that day; default from + 7 days"`
	Query      string `json:"query,omitempty" desc:"text to match in events"`
	TimeZone   string `json:"time_zone,omitempty" desc:"IANA zone for local times and results; default the calendar's"`
	MaxResults int    `json:"max_results,omitempty" desc:"1-250, default 50"`
	PageToken  string `json:"page_token,omitempty" desc:"next_page_token from a previous call"`
}

type listEventsOut struct {
	CalendarID    string  `json:"calendar_id"`
	From          string  `json:"from"`
	To            string  `json:"to"`
	TimeZone      string  `json:"time_zone,omitempty"`
	Events        []event `json:"events"`
	NextPageToken string  `json:"next_page_token,omitempty"`
}

func (g *group) listEvents() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "calendar_list_events",
		Description: "List events in a time range (default: the next 7 days of the primary calendar), recurring events expanded, in start order.",
		ReadOnly:    true, Untrusted: true,
	}, func(ctx context.Context, in listEventsIn) (any, error) {
		calID := calendarID(in.CalendarID)
		zone, err := zoneParam(in.TimeZone)
		if err != nil {
			return nil, err
		}
		size := in.MaxResults
		switch {
		case size == 0:
			size = 50
		case size < 1 || size > 250:
			return nil, google.Invalid("max_results", "must be between 1 and 250")
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		start, end, loc, err := g.resolveRange(ctx, svc, calID, zone, in.From, in.To)
		if err != nil {
			return nil, err
		}
		var res *gcal.Events
		err = g.api.Call(ctx, calendarWhat(calID), func() error {
			c := svc.Events.List(calID).Context(ctx).SingleEvents(true).OrderBy("startTime").
				TimeMin(start.Format(time.RFC3339)).TimeMax(end.Format(time.RFC3339)).MaxResults(int64(size)).
				Fields("timeZone", "nextPageToken", "items("+eventFields+")")
			if loc != nil {
				c.TimeZone(loc.String())
			}
			if q := strings.TrimSpace(in.Query); q != "" {
				c.Q(q)
			}
			if in.PageToken != "" {
				c.PageToken(in.PageToken)
			}
			res, err = c.Do()
			return err
		})
		if err != nil {
			return nil, err
		}
		if loc == nil {
			loc, _ = loadZone(res.TimeZone)
		}
		out := listEventsOut{CalendarID: calID, From: stamp(start, loc), To: stamp(end, loc),
			TimeZone: res.TimeZone, Events: make([]event, 0, len(res.Items)), NextPageToken: res.NextPageToken}
		if loc != nil {
			out.TimeZone = loc.String()
		}
		for _, e := range res.Items {
			out.Events = append(out.Events, toEvent(e))
		}
		return out, nil
	})
}

type getEventIn struct {
	CalendarID string `json:"calendar_id,omitempty" desc:"default primary"`
	EventID    string `json:"event_id"`
	TimeZone   string `json:"time_zone,omitempty" desc:"IANA zone for the result; default the calendar's"`
}

func (g *group) getEvent() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "calendar_get_event",
		Description: "Get one event with its description, attendees and their replies, organizer, reminders, recurrence and links.",
		ReadOnly:    true, Untrusted: true,
	}, func(ctx context.Context, in getEventIn) (any, error) {
		calID, id := calendarID(in.CalendarID), strings.TrimSpace(in.EventID)
		if id == "" {
			return nil, google.Invalid("event_id", "is empty")
		}
		zone, err := zoneParam(in.TimeZone)
		if err != nil {
			return nil, err
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		var e *gcal.Event
		err = g.api.Call(ctx, eventWhat(id), func() error {
			c := svc.Events.Get(calID, id).Context(ctx)
			if zone != "" {
				c.TimeZone(zone)
			}
			e, err = c.Do()
			return err
		})
		if err != nil {
			return nil, err
		}
		return toDetail(e), nil
	})
}

type createEventIn struct {
	CalendarID  string   `json:"calendar_id,omitempty" desc:"default primary"`
	Title       string   `json:"title"`
	Start       string   `json:"start" desc:"RFC3339, local date-time in time_zone, or a date for an all-day event"`
	End         string   `json:"end,omitempty" desc:"same form as start; all-day: the last day; default 1 hour or 1 day"`
	TimeZone    string   `json:"time_zone,omitempty" desc:"IANA zone; default the calendar's"`
	Location    string   `json:"location,omitempty"`
	Description string   `json:"description,omitempty"`
	Attendees   []string `json:"attendees,omitempty" desc:"emails to invite"`
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

func (g *group) createEvent() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "calendar_create_event",
		Description: "Create an event, timed or all-day, with attendees, reminders, recurrence and an optional Meet link.",
		// Inviting people emails them: that waits for approval.
		EffectFor: tools.By(func(_ context.Context, in createEventIn) tools.Effect {
			return invites(len(in.Attendees), in.SendUpdates)
		}),
		Summarize: tools.By(func(_ context.Context, in createEventIn) string {
			s := fmt.Sprintf("Create the event '%s'%s at %s", tools.Shorten(in.Title, 80), onCalendar(in.CalendarID), in.Start)
			if len(in.Attendees) > 0 {
				s += " and invite " + tools.Names(in.Attendees, 5)
			}
			return s
		}),
	}, func(ctx context.Context, in createEventIn) (any, error) {
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
	})
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

type updateEventIn struct {
	CalendarID      string   `json:"calendar_id,omitempty" desc:"default primary"`
	EventID         string   `json:"event_id"`
	Title           *string  `json:"title,omitempty"`
	Start           string   `json:"start,omitempty" desc:"new start; the duration is kept if end is not given"`
	End             string   `json:"end,omitempty" desc:"new end; all-day: the last day"`
	TimeZone        string   `json:"time_zone,omitempty" desc:"IANA zone for local times"`
	Location        *string  `json:"location,omitempty"`
	Description     *string  `json:"description,omitempty"`
	AddAttendees    []string `json:"add_attendees,omitempty" desc:"emails to invite"`
	RemoveAttendees []string `json:"remove_attendees,omitempty" desc:"emails to uninvite"`
	Reminders       []int    `json:"reminders,omitempty" desc:"replace popup reminders, minutes before; [] for none"`
	Meet            bool     `json:"meet,omitempty" desc:"add a Google Meet link"`
	SendUpdates     string   `json:"send_updates,omitempty" desc:"who is emailed; default all" enum:"all,external,none"`
	Recurrence      *string  `json:"recurrence,omitempty" desc:"new RRULE, e.g. RRULE:FREQ=WEEKLY;COUNT=4; \"\" ends the repeating"`
}

func (g *group) updateEvent() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "calendar_update_event",
		Description: "Change an event: title, time, location, description, attendees, reminders or Meet link; fields not given stay as they are.",
		// Changing who is invited, or when, emails the attendees.
		EffectFor: tools.By(func(_ context.Context, in updateEventIn) tools.Effect {
			n := len(in.AddAttendees) + len(in.RemoveAttendees)
			if in.Start != "" || in.End != "" {
				n++
			}
			return invites(n, in.SendUpdates)
		}),
		Summarize: tools.By(func(ctx context.Context, in updateEventIn) string {
			s := "Change the calendar event " + in.EventID + onCalendar(in.CalendarID)
			if in.Start != "" {
				s += ", to start at " + in.Start
			}
			if len(in.AddAttendees) > 0 {
				s += ", invite " + tools.Names(in.AddAttendees, 5)
			}
			if len(in.RemoveAttendees) > 0 {
				s += ", uninvite " + tools.Names(in.RemoveAttendees, 5)
			}
			if in.SendUpdates != "none" {
				return s + ", and email " + g.attendees(ctx, in.CalendarID, in.EventID)
			}
			return s + ", without emailing " + g.attendees(ctx, in.CalendarID, in.EventID)
		}),
	}, func(ctx context.Context, in updateEventIn) (any, error) {
		calID, id := calendarID(in.CalendarID), strings.TrimSpace(in.EventID)
		if id == "" {
			return nil, google.Invalid("event_id", "is empty")
		}
		zone, err := zoneParam(in.TimeZone)
		if err != nil {
			return nil, err
		}
		var start, end *moment
		if strings.TrimSpace(in.Start) != "" {
			m, err := parseMoment("start", in.Start)
			if err != nil {
				return nil, err
			}
			start = &m
		}
		if strings.TrimSpace(in.End) != "" {
			m, err := parseMoment("end", in.End)
			if err != nil {
				return nil, err
			}
			end = &m
		}
		add, err := attendeeList("add_attendees", in.AddAttendees)
		if err != nil {
			return nil, err
		}
		remove, err := attendeeList("remove_attendees", in.RemoveAttendees)
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
		if in.Title != nil && strings.TrimSpace(*in.Title) == "" {
			return nil, google.Invalid("title", "is empty")
		}
		var rrule []string
		if in.Recurrence != nil {
			r := strings.TrimSpace(*in.Recurrence)
			if r != "" && !strings.HasPrefix(r, "RRULE:") {
				return nil, google.Invalid("recurrence", "must start with RRULE:, e.g. RRULE:FREQ=WEEKLY;COUNT=4, or be \"\" to stop repeating")
			}
			if r != "" {
				rrule = []string{r}
			}
		}
		if in.Title == nil && in.Location == nil && in.Description == nil && start == nil && end == nil &&
			len(add) == 0 && len(remove) == 0 && reminders == nil && !in.Meet && in.Recurrence == nil {
			return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Nothing to change was given.",
				Suggestion: "Call calendar_update_event again with the fields to change."}
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		old, err := g.event(ctx, in.CalendarID, id)
		if err != nil {
			return nil, err
		}
		patch := &gcal.Event{Reminders: reminders}
		if in.Title != nil {
			patch.Summary = strings.TrimSpace(*in.Title)
		}
		if in.Location != nil {
			patch.Location = *in.Location
			patch.ForceSendFields = append(patch.ForceSendFields, "Location")
		}
		if in.Description != nil {
			patch.Description = *in.Description
			patch.ForceSendFields = append(patch.ForceSendFields, "Description")
		}
		if in.Recurrence != nil {
			// The series' new rule; null ends the repeating.
			patch.Recurrence = rrule
			if rrule == nil {
				patch.NullFields = append(patch.NullFields, "Recurrence")
			}
		}
		if start != nil || end != nil {
			if err := g.reschedule(ctx, svc, calID, zone, old, patch, start, end); err != nil {
				return nil, err
			}
		}
		if len(add) > 0 || len(remove) > 0 {
			patch.Attendees = mergeAttendees(old.Attendees, add, remove)
			patch.ForceSendFields = append(patch.ForceSendFields, "Attendees")
		}
		meet := in.Meet && old.HangoutLink == "" && old.ConferenceData == nil
		if meet {
			patch.ConferenceData = meetRequest()
		}
		c := svc.Events.Patch(calID, id, patch).SendUpdates(updates)
		if meet {
			c.ConferenceDataVersion(1)
		}
		var out *gcal.Event
		err = g.api.Call(ctx, eventWhat(id), func() error {
			out, err = c.Context(ctx).Do()
			return err
		})
		if err != nil {
			return nil, err
		}
		return toDetail(out), nil
	})
}

// reschedule sets patch's start and end from the new start and/or end,
// keeping the old duration when only the start moves.
func (g *group) reschedule(ctx context.Context, svc *gcal.Service, calID, zone string, old, patch *gcal.Event, start, end *moment) error {
	if old.Start == nil || old.End == nil {
		return fmt.Errorf("calendar: event %s has no start or end", old.Id)
	}
	oldAllDay := old.Start.Date != ""
	allDay := oldAllDay
	if start != nil {
		allDay = start.date
	}
	if end != nil && end.date != allDay {
		return google.Invalid("end", "must be a date for an all-day event and a time otherwise")
	}
	if allDay {
		var first, last time.Time
		if start != nil {
			first = start.t
		} else {
			first, _ = time.Parse(time.DateOnly, old.Start.Date)
		}
		switch {
		case end != nil:
			last = end.t
		case oldAllDay:
			s, err1 := time.Parse(time.DateOnly, old.Start.Date)
			e, err2 := time.Parse(time.DateOnly, old.End.Date)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("calendar: event %s has unreadable dates", old.Id)
			}
			last = first.Add(e.Sub(s)).AddDate(0, 0, -1)
		default:
			last = first
		}
		if last.Before(first) {
			return google.Invalid("end", "must not be before start")
		}
		patch.Start = &gcal.EventDateTime{Date: first.Format(time.DateOnly), NullFields: []string{"DateTime", "TimeZone"}}
		patch.End = &gcal.EventDateTime{Date: last.AddDate(0, 0, 1).Format(time.DateOnly), NullFields: []string{"DateTime", "TimeZone"}}
		return nil
	}
	if zone == "" {
		zone = old.Start.TimeZone
	}
	var loc *time.Location
	if zone != "" || (start != nil && start.local) || (end != nil && end.local) {
		var err error
		if loc, err = g.zoneFor(ctx, svc, calID, zone); err != nil {
			return err
		}
	}
	duration := time.Hour
	oldStart, err1 := time.Parse(time.RFC3339, old.Start.DateTime)
	oldEnd, err2 := time.Parse(time.RFC3339, old.End.DateTime)
	if !oldAllDay && (err1 != nil || err2 != nil) {
		return fmt.Errorf("calendar: event %s has unreadable times", old.Id)
	}
	if !oldAllDay {
		duration = oldEnd.Sub(oldStart)
	}
	s, e := oldStart, oldEnd
	if start != nil {
		s = start.in(loc)
		e = s.Add(duration)
	}
	if end != nil {
		e = end.in(loc)
	}
	if !e.After(s) {
		return google.Invalid("end", "must be after start")
	}
	patch.Start, patch.End = timed(s, loc), timed(e, loc)
	patch.Start.NullFields = []string{"Date"}
	patch.End.NullFields = []string{"Date"}
	return nil
}

// mergeAttendees keeps old attendees (and their replies) not removed and
// appends new ones not already invited. Emails compare case-insensitively.
func mergeAttendees(old []*gcal.EventAttendee, add, remove []string) []*gcal.EventAttendee {
	drop := map[string]bool{}
	for _, r := range remove {
		drop[strings.ToLower(r)] = true
	}
	out := []*gcal.EventAttendee{}
	seen := map[string]bool{}
	for _, a := range old {
		k := strings.ToLower(a.Email)
		if drop[k] {
			continue
		}
		seen[k] = true
		out = append(out, a)
	}
	for _, a := range add {
		if k := strings.ToLower(a); !seen[k] && !drop[k] {
			seen[k] = true
			out = append(out, &gcal.EventAttendee{Email: a})
		}
	}
	return out
}

type deleteEventIn struct {
	CalendarID  string `json:"calendar_id,omitempty" desc:"default primary"`
	EventID     string `json:"event_id"`
	SendUpdates string `json:"send_updates,omitempty" desc:"who is emailed; default all" enum:"all,external,none"`
}

func (g *group) deleteEvent() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "calendar_delete_event",
		Description: "Delete an event; attendees are told unless send_updates is none.",
		Effect:      tools.EffectDestructive,
		Summarize: tools.By(func(ctx context.Context, in deleteEventIn) string {
			s := "Delete the calendar event " + in.EventID + onCalendar(in.CalendarID)
			if in.SendUpdates != "none" {
				s += " and tell " + g.attendees(ctx, in.CalendarID, in.EventID)
			}
			return s
		}),
	}, func(ctx context.Context, in deleteEventIn) (any, error) {
		calID, id := calendarID(in.CalendarID), strings.TrimSpace(in.EventID)
		if id == "" {
			return nil, google.Invalid("event_id", "is empty")
		}
		updates, err := sendUpdates(in.SendUpdates)
		if err != nil {
			return nil, err
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		err = g.api.Call(ctx, eventWhat(id), func() error {
			return svc.Events.Delete(calID, id).Context(ctx).SendUpdates(updates).Do()
		})
		if err != nil {
			return nil, err
		}
		return map[string]any{"deleted": true, "event_id": id, "calendar_id": calID}, nil
	})
}

type freebusyIn struct {
	Calendars []string `json:"calendars,omitempty" desc:"calendar ids or people's emails; default primary"`
	From      string   `json:"from,omitempty" desc:"RFC3339, or local date/time in time_zone; default now"`
	To        string   `json:"to,omitempty" desc:"same forms; a date includes that day; default from + 7 days"`
	TimeZone  string   `json:"time_zone,omitempty" desc:"IANA zone for local times and results; default the primary calendar's"`
}

type period struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

type busyOut struct {
	ID    string   `json:"id"`
	Busy  []period `json:"busy"`
	Error string   `json:"error,omitempty"`
}

func (g *group) freebusy() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "calendar_freebusy",
		Description: "Show busy periods of the person's or others' calendars in a time range (default: the next 7 days), to find free time.",
		ReadOnly:    true, Untrusted: true,
	}, func(ctx context.Context, in freebusyIn) (any, error) {
		zone, err := zoneParam(in.TimeZone)
		if err != nil {
			return nil, err
		}
		ids := make([]string, 0, len(in.Calendars))
		for _, c := range in.Calendars {
			if c = strings.TrimSpace(c); c != "" {
				ids = append(ids, c)
			}
		}
		if len(ids) == 0 {
			ids = []string{"primary"}
		}
		if len(ids) > 50 {
			return nil, google.Invalid("calendars", "may hold at most 50 calendars")
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		start, end, loc, err := g.resolveRange(ctx, svc, "primary", zone, in.From, in.To)
		if err != nil {
			return nil, err
		}
		req := &gcal.FreeBusyRequest{TimeMin: start.Format(time.RFC3339), TimeMax: end.Format(time.RFC3339)}
		if loc != nil {
			req.TimeZone = loc.String()
		}
		for _, id := range ids {
			req.Items = append(req.Items, &gcal.FreeBusyRequestItem{Id: id})
		}
		var res *gcal.FreeBusyResponse
		err = g.api.Call(ctx, "free/busy information", func() error {
			res, err = svc.Freebusy.Query(req).Context(ctx).Do()
			return err
		})
		if err != nil {
			return nil, err
		}
		out := make([]busyOut, 0, len(ids))
		for _, id := range ids {
			b := busyOut{ID: id, Busy: []period{}}
			fc, ok := res.Calendars[id]
			if !ok {
				b.Error = "no answer for this calendar"
			}
			for _, p := range fc.Busy {
				b.Busy = append(b.Busy, period{Start: p.Start, End: p.End})
			}
			for _, e := range fc.Errors {
				b.Error = e.Reason
			}
			out = append(out, b)
		}
		result := map[string]any{"from": stamp(start, loc), "to": stamp(end, loc), "calendars": out}
		if loc != nil {
			result["time_zone"] = loc.String()
		}
		return result, nil
	})
}
