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
		msgs   []Message
		tokens int
		recent bool // part of the current turn
	}
	var units []unit
	for i := 0; i < len(h); i++ {
		m := h[i]
		switch {
		case m.Role == RoleTool:
			continue // orphan: its assistant message is outside the window
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			results := map[string]Message{}
			j := i + 1
			for ; j < len(h) && h[j].Role == RoleTool; j++ {
				results[h[j].ToolCallID] = h[j]
			}
			u := unit{recent: i >= current}
			asst := m
			asst.ToolCalls = nil
			var rs []Message
			for _, c := range m.ToolCalls {
				r, ok := results[c.ID]
				if !ok {
					continue
				}
				asst.ToolCalls = append(asst.ToolCalls, c)
				if !u.recent {
					r = shorten(r, maxChars)
				}
				rs = append(rs, r)
			}
			i = j - 1
			if len(asst.ToolCalls) == 0 && asst.Text == "" {
				continue
			}
			u.msgs = append([]Message{asst}, rs...)
			for _, x := range u.msgs {
				u.tokens += x.Tokens
			}
			units = append(units, u)
		default:
			units = append(units, unit{msgs: []Message{m}, tokens: m.Tokens, recent: i >= current})
		}
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
	var out []Message
	for _, u := range units[start:] {
		out = append(out, u.msgs...)
	}
	return out
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
