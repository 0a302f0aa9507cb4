package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// chart is a line chart drawn on the server as SVG: one line per
// channel over a row of time slots.
type chart struct {
	Title  string
	Max    int64
	Series []series
	// Ticks label some slots on the x axis.
	Ticks []tick
	Empty bool
}

type series struct {
	Channel string
	Color   string
	// Points is the polyline's points attribute: numbers only.
	Points string
	Total  int64
}

type tick struct {
	X     int
	Label string
}

// Chart geometry: the plot area inside a 600×200 view box.
const (
	chartW, chartH = 600, 200
	padL, padB     = 50, 20
)

var palette = [...]string{"#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"}

type pair struct{ messages, tokens chart }

// charts turns hourly totals into the last day by hour and the last 30
// days by day, each for messages and tokens.
func charts(hours []TrafficHour, now time.Time) (day, month pair) {
	dayStart := now.Truncate(time.Hour).Add(-23 * time.Hour)
	monthStart := now.Truncate(24*time.Hour).AddDate(0, 0, -29)
	slot := func(t time.Time, start time.Time, width time.Duration, n int) int {
		i := int(t.Sub(start) / width)
		if t.Before(start) || i >= n {
			return -1
		}
		return i
	}
	build := func(title string, n int, start time.Time, width time.Duration, value func(TrafficHour) int64, label func(time.Time) string, every int) chart {
		by := map[string][]int64{}
		for _, h := range hours {
			i := slot(h.Hour, start, width, n)
			if i < 0 {
				continue
			}
			if by[h.Channel] == nil {
				by[h.Channel] = make([]int64, n)
			}
			by[h.Channel][i] += value(h)
		}
		c := chart{Title: title, Max: 1}
		names := make([]string, 0, len(by))
		for name := range by {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, vals := range by {
			for _, v := range vals {
				c.Max = max(c.Max, v)
			}
		}
		plotW, plotH := chartW-padL, chartH-padB
		x := func(i int) int {
			if n == 1 {
				return padL
			}
			return padL + i*plotW/(n-1)
		}
		for k, name := range names {
			var pts strings.Builder
			var total int64
			for i, v := range by[name] {
				total += v
				fmt.Fprintf(&pts, "%d,%d ", x(i), plotH-int(v*int64(plotH)/c.Max))
			}
			c.Series = append(c.Series, series{Channel: name, Color: palette[k%len(palette)], Points: strings.TrimSpace(pts.String()), Total: total})
		}
		for i := 0; i < n; i += every {
			c.Ticks = append(c.Ticks, tick{X: x(i), Label: label(start.Add(time.Duration(i) * width))})
		}
		c.Empty = len(c.Series) == 0
		return c
	}
	msgs := func(h TrafficHour) int64 { return h.Messages }
	toks := func(h TrafficHour) int64 { return h.Tokens }
	hourLabel := func(t time.Time) string { return t.Format("15:04") }
	dayLabel := func(t time.Time) string { return t.Format("Jan 2") }
	day = pair{
		build("Messages per hour, last 24 hours (UTC)", 24, dayStart, time.Hour, msgs, hourLabel, 4),
		build("Tokens per hour, last 24 hours (UTC)", 24, dayStart, time.Hour, toks, hourLabel, 4),
	}
	month = pair{
		build("Messages per day, last 30 days", 30, monthStart, 24*time.Hour, msgs, dayLabel, 5),
		build("Tokens per day, last 30 days", 30, monthStart, 24*time.Hour, toks, dayLabel, 5),
	}
	return day, month
}
