package calendar

import (
	"context"
	"fmt"
	"strings"
	"time"

	gcal "google.golang.org/api/calendar/v3"

	"loadout/google"
	"loadout/tools"
)

type updateEventIn struct {
	CalendarID      string   `json:"calendar_id,omitempty" desc:"default primary"`
	EventID         string   `json:"event_id"`
	Title           *string  `json:"title,omitempty"`
	Start           string   `json:"start,omitempty" desc:"new start; the duration is kept if end is not given"`
	End             string   `json:"end,omitempty" desc:"new end; all-day: the last day"`
	TimeZone        string   `json:"time_zone,omitempty" desc:"IANA zone for local times"`
	Location        *string  `json:"location,omitempty"`
	Description     *string  `json:"description,omitempty"`
	AddAttendees    []string `json:"add_attendees,omitempty" desc:"emails to invite" reach:"recipients"`
	RemoveAttendees []string `json:"remove_attendees,omitempty" desc:"emails to uninvite" reach:"recipients"`
	Reminders       []int    `json:"reminders,omitempty" desc:"replace popup reminders, minutes before; [] for none"`
	Meet            bool     `json:"meet,omitempty" desc:"add a Google Meet link"`
	SendUpdates     string   `json:"send_updates,omitempty" desc:"who is emailed; default all" enum:"all,external,none"`
	Recurrence      *string  `json:"recurrence,omitempty" desc:"new RRULE, e.g. RRULE:FREQ=WEEKLY;COUNT=4; \"\" ends the repeating"`
}

func (g *group) updateEvent(ctx context.Context, in updateEventIn) (any, error) {
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

func (g *group) deleteEvent(ctx context.Context, in deleteEventIn) (any, error) {
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
}
