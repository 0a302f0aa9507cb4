// Package clock provides the core tool get_current_time.
package clock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"loadout/tools"
)

type input struct {
	TimeZone string `json:"time_zone,omitempty" desc:"IANA zone, e.g. Europe/Lisbon; default UTC"`
}

type output struct {
	Time     string `json:"time"`
	TimeZone string `json:"time_zone"`
	Weekday  string `json:"weekday"`
	Unix     int64  `json:"unix"`
}

// Tool returns get_current_time. now defaults to time.Now.
func Tool(now func() time.Time) tools.Tool {
	if now == nil {
		now = time.Now
	}
	return tools.New(tools.Definition{
		Name:        "get_current_time",
		Examples:    []string{"what day of the week is it", "is it night there right now", "what time is it", "today's date", "what day is it today", "the time in another city or time zone", "what's the hour now", "current local time in London", "which date is it", "how late is it over there", "what month are we in", "clock", "is it too late to call Lisbon now", "time zone difference with Tokyo", "what's the date tomorrow", "is it the weekend yet"},
		Description: "The current date and time, in a time zone if given.",
		ReadOnly:    true,
		Timeout:     2 * time.Second,
	}, func(ctx context.Context, in input) (any, error) {
		zone := strings.TrimSpace(in.TimeZone)
		if zone == "" {
			zone = "UTC"
		}
		loc, err := time.LoadLocation(zone)
		if err != nil || strings.EqualFold(zone, "local") {
			return nil, &tools.Error{
				Code:       tools.CodeInvalidArgument,
				Message:    fmt.Sprintf("'%s' is not an IANA time zone.", in.TimeZone),
				Suggestion: "Use a name like Europe/Berlin, America/Sao_Paulo or UTC.",
			}
		}
		t := now().In(loc)
		return output{Time: t.Format(time.RFC3339), TimeZone: loc.String(), Weekday: t.Weekday().String(), Unix: t.Unix()}, nil
	})
}
