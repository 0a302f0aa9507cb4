package ui

import (
	"encoding/json"
	"net/http"

	"loadout/chat"
)

// entry is one message of a conversation as the page shows it.
type entry struct {
	Role  string
	Who   string
	Text  string
	Calls []call
	// Tool result.
	Tool, Status, Code string
	// Hidden: a personal result of someone else.
	Hidden   string
	Approval *chat.Approval
}

type call struct{ Name, Arguments string }

// conversation shows a chat's open session: to the operator, or to a
// person who wrote in it.
func (c *Console) conversation(w http.ResponseWriter, r *http.Request, v viewer) error {
	k, err := key(r, "key", false)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if !v.Admin {
		in, err := c.d.Store.InChat(ctx, k, v.UserKey)
		if err != nil {
			return err
		}
		if !in {
			c.log.Warn("ui: refused a chat that is not the person's", "user", v.UserKey, "chat", k)
			return errMissing
		}
	}
	ch, err := c.d.Store.OpenSessionOf(ctx, k)
	if err != nil {
		return err
	}
	msgs, err := c.d.Store.Recent(ctx, ch.SessionID, messagesShown)
	if err != nil {
		return err
	}
	var out []entry
	for _, m := range msgs {
		e := entry{Role: string(m.Role), Text: m.Text}
		switch m.Role {
		case chat.RoleUser:
			e.Who = m.UserKey
		case chat.RoleTool:
			e.Tool, e.Status, e.Code = m.ToolName, m.Status, m.Code
			if m.UserKey != "" && !v.owns(m.UserKey) {
				e.Text, e.Hidden = "", m.UserKey
			}
		case chat.RoleAssistant:
			for _, tc := range m.ToolCalls {
				e.Calls = append(e.Calls, call{Name: tc.Name, Arguments: pretty(tc.Arguments)})
			}
			if m.Ask != "" {
				if a, err := c.d.Store.ApprovalByID(ctx, m.Ask); err == nil {
					e.Approval = &a
				}
			}
		}
		out = append(out, e)
	}
	c.render(w, r, http.StatusOK, "conversation", v, map[string]any{"Chat": c.rows([]Chat{ch})[0], "Entries": out, "Shown": messagesShown})
	return nil
}

// pretty indents JSON arguments; anything else is shown as it is.
func pretty(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return s
	}
	return string(b)
}
