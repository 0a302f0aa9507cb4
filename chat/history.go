package chat

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// trimHistory chooses the history sent to the model, after head (the
// system prompt). It works in units that must travel together: a user
// message, an assistant text, or an assistant's tool calls with all their
// results, so trimming never separates a call from its result. Every unit
// of the current turn (from index current on) is kept; older units are
// added newest first while they fit in budget tokens. Tool results older
// than the current turn are cut to maxChars. A call whose result was never
// persisted (the process died mid-round) is dropped, as are results whose
// call is outside the window.
//
// It walks h backwards from the newest message and stops at the first
// unit that does not fit, so its cost is that of the window, not of the
// history. The result is built in buf when it has room (buf's contents
// are overwritten), else in one new allocation.
func trimHistory(buf, h []Message, current, budget, maxChars int, head ...Message) []Message {
	// A unit of tool calls with the results paired to them; the other
	// units are single messages and need no record.
	type callUnit struct {
		at      int // index in h of the assistant message
		calls   []ToolCall
		results []Message
	}
	var units []callUnit // newest first
	used, count, first := 0, 0, -1
	for i := len(h) - 1; i >= 0; {
		j := i
		for j >= 0 && h[j].Role == RoleTool {
			j--
		}
		if j < 0 {
			break // tool results whose call is before the window
		}
		m, results := &h[j], h[j+1:i+1]
		i = j - 1
		tokens, size := m.Tokens, 1
		calls := m.Role == RoleAssistant && len(m.ToolCalls) > 0
		var u callUnit
		if calls {
			u.at = j
			u.calls, u.results = pairCalls(m.ToolCalls, results)
			if len(u.calls) == 0 && m.Text == "" {
				continue
			}
			for k, r := range u.results {
				if j < current {
					r = shorten(r, maxChars)
					u.results[k] = r
				}
				tokens += r.Tokens
			}
			size += len(u.results)
		}
		// Tool messages after a message without calls are orphans, left out.
		if j < current && used+tokens > budget {
			break
		}
		used += tokens
		count += size
		first = j
		if calls {
			units = append(units, u)
		}
	}
	if first < 0 {
		return nil
	}
	out := buf[:0]
	if cap(out) < len(head)+count {
		out = make([]Message, 0, len(head)+count)
	}
	out = append(out, head...)
	// Forwards over the same units: tool results come only with their
	// calls, and a call unit left out above has no record.
	next := len(units) - 1
	for j := first; j < len(h); j++ {
		switch m := &h[j]; {
		case m.Role == RoleTool:
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			if next < 0 || units[next].at != j {
				continue
			}
			u := units[next]
			next--
			out = append(out, *m)
			out[len(out)-1].ToolCalls = u.calls
			out = append(out, u.results...)
		default:
			out = append(out, *m)
		}
	}
	return out
}

// pairCalls returns the calls that have a result among results, in the
// calls' order, with the first result of each. It reuses calls when every
// call has its result.
func pairCalls(calls []ToolCall, results []Message) ([]ToolCall, []Message) {
	byID := make(map[string]int, len(results))
	for k := len(results) - 1; k >= 0; k-- {
		byID[results[k].ToolCallID] = k
	}
	kept := make([]Message, 0, len(calls))
	all := true
	for _, c := range calls {
		k, ok := byID[c.ID]
		if !ok {
			all = false
			continue
		}
		kept = append(kept, results[k])
	}
	if all {
		return calls, kept
	}
	paired := make([]ToolCall, 0, len(kept))
	for _, c := range calls {
		if _, ok := byID[c.ID]; ok {
			paired = append(paired, c)
		}
	}
	return paired, kept
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

// HideOthers is what user may see of window, a run of a session's
// messages in order: the one rule for the model, on user's turn, and for
// the conversation page user opens. It replaces, in window, each personal
// tool result that belongs to someone other than user (a memory recall
// or a mailbox read another member of a group ran) with a placeholder.
// What the model may have copied from such a result goes with it: the
// arguments of the calls made on that person's turns after it (a search
// for the PIN a recall returned), and those calls' results, which may
// echo them. window must hold copies: the history itself keeps all of it
// for its owner's turns (the calls' lists are cloned before they change).
//
// It reports whose each changed message was: hidden[i] is the person
// message i was hidden for, "" for a message left as it is; hidden is
// nil when nothing was hidden.
func HideOthers(window []Message, user string) (hidden []string) {
	exposed := map[string]bool{} // whose personal results were hidden so far
	calls := map[string]string{} // call id of a hidden call → whose turn made it
	owner := ""                  // whose turn the messages belong to
	mark := func(i int, who string) {
		if hidden == nil {
			hidden = make([]string, len(window))
		}
		hidden[i] = who
	}
	for i := range window {
		m := &window[i]
		switch {
		case m.Role == RoleUser:
			owner = m.UserKey
		case m.Role == RoleTool && m.UserKey != "" && m.UserKey != user:
			m.Text = fmt.Sprintf("(a result for %s, not shown to others)", m.UserKey)
			mark(i, m.UserKey)
			exposed[m.UserKey] = true
			if owner == "" {
				owner = m.UserKey // a window that starts within the turn
			}
		case m.Role == RoleTool:
			if who, ok := calls[m.ToolCallID]; ok {
				m.Text = fmt.Sprintf("(a result for %s, not shown to others)", who)
				mark(i, who)
			}
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0 && owner != "" && owner != user && exposed[owner]:
			note, _ := json.Marshal(map[string]string{"not_shown": fmt.Sprintf("(arguments of a call for %s, not shown to others)", owner)})
			cs := slices.Clone(m.ToolCalls) // shared with the history
			for k := range cs {
				cs[k].Arguments = string(note)
				calls[cs[k].ID] = owner
			}
			m.ToolCalls = cs
			mark(i, owner)
		}
	}
	return hidden
}
