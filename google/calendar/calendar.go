// Package calendar provides the google_calendar tool group: the calling
// person's calendars, events and free/busy times in Google Calendar.
package calendar

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even where the system has no zoneinfo

	gcal "google.golang.org/api/calendar/v3"
	"google.golang.org/api/googleapi"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_calendar"

// Service returns the Calendar API as the group asks google.Client for
// it: path calendar/v3/ and the full Calendar scope.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "calendar/v3/", Scopes: []string{gcal.CalendarScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff governs retries of temporary Google errors (429, 5xx).
	Backoff backoff.Policy
	// TimeZone is the IANA zone for times given without an offset when a
	// call names none; empty means the calendar's own zone.
	TimeZone string
	// Now is the clock for default ranges; nil means time.Now.
	Now func() time.Time
}

// New returns the google_calendar group, its tools and scopes. Every
// tool acts as the calling person through c; a person without a connected
// account gets a not_connected error. An invalid o.TimeZone is ignored.
func New(c google.Client, o Options) google.Group {
	if o.Now == nil {
		o.Now = time.Now
	}
	if _, err := loadZone(o.TimeZone); err != nil {
		o.TimeZone = ""
	}
	g := &group{opts: o, api: google.API[gcal.Service]{Client: c, Service: Service(), New: gcal.NewService, Backoff: o.Backoff, Map: mapError}}
	return google.Group{Examples: examples,
		Group: tools.Group{
			Name:        GroupName,
			DisplayName: "Google Calendar",
			Description: "List, create, update and delete events in the person's Google Calendar, and check free/busy times.",
		},
		Tools: []tools.Tool{
			tools.New(tools.Definition{
				Name:        "calendar_list_calendars",
				Description: "List the person's calendars with their ids, names, access roles and time zones.",
				ReadOnly:    true, Untrusted: true,
			}, g.listCalendars),
			tools.New(tools.Definition{
				Name:        "calendar_list_events",
				Description: "List events in a time range (default: the next 7 days of the primary calendar), recurring events expanded, in start order.",
				ReadOnly:    true, Untrusted: true,
			}, g.listEvents),
			tools.New(tools.Definition{
				Name:        "calendar_get_event",
				Description: "Get one event with its description, attendees and their replies, organizer, reminders, recurrence and links.",
				ReadOnly:    true, Untrusted: true,
			}, g.getEvent),
			tools.New(tools.Definition{
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
			}, g.createEvent),
			tools.New(tools.Definition{
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
				Reaches: tools.By(func(ctx context.Context, in updateEventIn) tools.Reach {
					return g.mailed(ctx, in.CalendarID, in.EventID, in.SendUpdates)
				}),
			}, g.updateEvent),
			tools.New(tools.Definition{
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
				Reaches: tools.By(func(ctx context.Context, in deleteEventIn) tools.Reach {
					return g.mailed(ctx, in.CalendarID, in.EventID, in.SendUpdates)
				}),
			}, g.deleteEvent),
			tools.New(tools.Definition{
				Name:        "calendar_freebusy",
				Description: "Show busy periods of the person's or others' calendars in a time range (default: the next 7 days), to find free time.",
				ReadOnly:    true, Untrusted: true,
			}, g.freebusy),
		},
		Scopes: Service().Scopes,
	}
}

type group struct {
	opts Options
	api  google.API[gcal.Service]
}

// mapError is google.MapError with 410 Gone (a deleted event) reported as
// not_found.
func mapError(err error, what string) error {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusGone {
		return &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("%s has been deleted.", what),
			Suggestion: "List the events again to get current ids."}
	}
	return google.MapError(err, what)
}

// zoneFor returns the location for times without an offset: name if set,
// else the group's default, else the calendar's own zone (one API call).
func (g *group) zoneFor(ctx context.Context, svc *gcal.Service, calID, name string) (*time.Location, error) {
	if name == "" {
		name = g.opts.TimeZone
	}
	if name == "" {
		err := g.api.Call(ctx, calendarWhat(calID), func() error {
			c, err := svc.Calendars.Get(calID).Context(ctx).Fields("timeZone").Do()
			if err == nil {
				name = c.TimeZone
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	loc, err := loadZone(name)
	if err != nil {
		return nil, fmt.Errorf("calendar: the calendar's time zone %q: %w", name, err)
	}
	return loc, nil
}

func calendarWhat(id string) string { return fmt.Sprintf("the calendar '%s'", id) }

func eventWhat(id string) string { return fmt.Sprintf("the event '%s'", id) }

// loadZone loads an IANA zone; "" is an error, and so is "Local".
func loadZone(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "local") {
		return nil, errors.New("not an IANA time zone")
	}
	return time.LoadLocation(name)
}

// zoneParam validates a time_zone argument; "" stays "".
func zoneParam(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", nil
	}
	if _, err := loadZone(name); err != nil {
		return "", &tools.Error{Code: tools.CodeInvalidArgument,
			Message:    fmt.Sprintf("parameter 'time_zone': '%s' is not an IANA time zone.", name),
			Suggestion: "Use a name like Europe/Berlin, America/New_York or UTC."}
	}
	return name, nil
}

// calendarID defaults an empty calendar id to primary.
func calendarID(s string) string {
	if s = strings.TrimSpace(s); s == "" {
		return "primary"
	}
	return s
}

// sendUpdates maps the send_updates argument to the API's value.
func sendUpdates(s string) (string, error) {
	switch s {
	case "", "all":
		return "all", nil
	case "external":
		return "externalOnly", nil
	case "none":
		return "none", nil
	}
	return "", google.Invalid("send_updates", "must be all, external or none")
}

// moment is a time argument as the model gave it.
type moment struct {
	t     time.Time // when local, a wall clock in UTC to be read in a zone
	date  bool      // a calendar date, no time of day
	local bool      // no offset given
}

const timeHelp = "must be RFC3339 like 2025-03-01T09:00:00+01:00, a local time like 2025-03-01T09:00, or a date like 2025-03-01"

// parseMoment reads RFC3339, a local date-time, or a date.
func parseMoment(param, s string) (moment, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return moment{t: t}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return moment{t: t, local: true}, nil
		}
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return moment{t: t, date: true, local: true}, nil
	}
	return moment{}, google.Invalid(param, fmt.Sprintf("'%s' %s", s, timeHelp))
}

// in returns the moment as an instant, reading a local one in loc.
func (m moment) in(loc *time.Location) time.Time {
	if !m.local {
		return m.t
	}
	y, mo, d := m.t.Date()
	h, mi, s := m.t.Clock()
	return time.Date(y, mo, d, h, mi, s, 0, loc)
}

// day returns a date moment's date.
func (m moment) day() string { return m.t.Format(time.DateOnly) }

// randomID returns n characters of base32hex (0-9, a-v), valid as a
// client-chosen event id or conference request id.
func randomID(n int) string {
	const alphabet = "0123456789abcdefghijklmnopqrstuv"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
