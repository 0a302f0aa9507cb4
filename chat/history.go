package chat

import (
	"fmt"
	"unicode/utf8"
)

// trimHistory chooses the history sent to the model. It works in units
// that must travel together: a user message, an assistant text, or an
// assistant's tool calls with all their results, so trimming never
// separates a call from its result. Every unit of the current turn (from
// index current on) is kept; older units are added newest first while they
// fit in budget tokens. Tool results older than the current turn are cut to
// maxChars. A call whose result was never persisted (the process died
// mid-round) is dropped, as are results whose call is outside the window.
func trimHistory(h []Message, current, budget, maxChars int) []Message {
	type unit struct {
		start  int // index in kept
		tokens int
		recent bool // part of the current turn
	}
	kept := make([]Message, 0, len(h))
	var units []unit
	for i := 0; i < len(h); i++ {
		m := h[i]
		if m.Role == RoleTool {
			continue // orphan: its assistant message is outside the window
		}
		u := unit{start: len(kept), recent: i >= current}
		if m.Role != RoleAssistant || len(m.ToolCalls) == 0 {
			kept = append(kept, m)
			units = append(units, unit{start: u.start, tokens: m.Tokens, recent: u.recent})
			continue
		}
		j := i + 1
		for j < len(h) && h[j].Role == RoleTool {
			j++
		}
		results := h[i+1 : j]
		asst := m
		asst.ToolCalls = nil
		kept = append(kept, asst)
		for _, c := range m.ToolCalls {
			for _, r := range results {
				if r.ToolCallID != c.ID {
					continue
				}
				asst.ToolCalls = append(asst.ToolCalls, c)
				if !u.recent {
					r = shorten(r, maxChars)
				}
				kept = append(kept, r)
				break
			}
		}
		i = j - 1
		if len(asst.ToolCalls) == 0 && asst.Text == "" {
			kept = kept[:u.start]
			continue
		}
		kept[u.start] = asst
		for _, x := range kept[u.start:] {
			u.tokens += x.Tokens
		}
		units = append(units, u)
	}
	used := 0
	start := len(units)
	for start > 0 {
		u := units[start-1]
		if !u.recent && used+u.tokens > budget {
			break
		}
		used += u.tokens
		start--
	}
	if start == len(units) {
		return nil
	}
	return kept[units[start].start:]
}

// shorten cuts a tool result's text to max characters, noting the cut, and
// scales its token count to match.
func shorten(m Message, max int) Message {
	n := utf8.RuneCountInString(m.Text)
	if n <= max {
		return m
	}
	r := []rune(m.Text)
	note := fmt.Sprintf("\n[… shortened: %d of %d characters omitted from this earlier result]", n-max, n)
	m.Text = string(r[:max]) + note
	m.Tokens = m.Tokens*max/n + 16
	return m
}
