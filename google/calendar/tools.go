package calendar

import (
	"context"
	"strings"
	"time"

	gcal "google.golang.org/api/calendar/v3"

	"loadout/google"
)

type calendarOut struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Primary  bool   `json:"primary,omitempty"`
	Access   string `json:"access"`
	TimeZone string `json:"time_zone,omitempty"`
}

type noInput struct{}

func (g *group) listCalendars(ctx context.Context, _ noInput) (any, error) {
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
	To         string `json:"to,omitempty" desc:"same forms; a date includes that day; default from + 7 days" reach:"-"`
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

func (g *group) listEvents(ctx context.Context, in listEventsIn) (any, error) {
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
}

type getEventIn struct {
	CalendarID string `json:"calendar_id,omitempty" desc:"default primary"`
	EventID    string `json:"event_id"`
	TimeZone   string `json:"time_zone,omitempty" desc:"IANA zone for the result; default the calendar's"`
}

func (g *group) getEvent(ctx context.Context, in getEventIn) (any, error) {
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
}

type freebusyIn struct {
	Calendars []string `json:"calendars,omitempty" desc:"calendar ids or people's emails; default primary"`
	From      string   `json:"from,omitempty" desc:"RFC3339, or local date/time in time_zone; default now"`
	To        string   `json:"to,omitempty" desc:"same forms; a date includes that day; default from + 7 days" reach:"-"`
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

func (g *group) freebusy(ctx context.Context, in freebusyIn) (any, error) {
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
}
