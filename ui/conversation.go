package ui

import (
	"context"
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
	// Hidden is whose the message is when the viewer may not see it (a
	// personal result of someone else, or what the model did with one on
	// that person's turn): chat.HideOthers decides, as for the model.
	Hidden string
	// Personal: the result hidden is itself personal (else it is of a
	// call made after one).
	Personal bool
	Approval *chat.Approval
	// Steps are, for a delegate call's result, the sub-agent's messages,
	// folded under it; StepsOf says whose they are when the viewer may
	// not see them.
	Steps   []entry
	StepsOf string
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
	out, err := c.entries(r.Context(), msgs, v, 0)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "conversation", v, map[string]any{"Chat": c.rows([]Chat{ch})[0], "Entries": out, "Shown": messagesShown})
	return nil
}

// maxFolded is how deep sub-agents' steps are shown under their calls.
const maxFolded = 3

// entries are msgs as the page shows them to v: a person sees what the
// model would see on their turn; the operator sees everything. A
// delegate call's result carries the sub-agent's steps, which only the
// person who delegated and the operator see.
func (c *Console) entries(ctx context.Context, msgs []chat.Message, v viewer, depth int) ([]entry, error) {
	var hidden []string
	if !v.Admin {
		hidden = chat.HideOthers(msgs, v.UserKey)
	}
	var out []entry
	for i, m := range msgs {
		e := entry{Role: string(m.Role), Text: m.Text}
		if hidden != nil {
			e.Hidden = hidden[i]
		}
		switch m.Role {
		case chat.RoleUser:
			e.Who = m.UserKey
		case chat.RoleTool:
			e.Tool, e.Status, e.Code = m.ToolName, m.Status, m.Code
			if e.Hidden != "" {
				e.Text, e.Personal = "", m.UserKey == e.Hidden
			}
			if m.ToolName == chat.DelegateName && depth < maxFolded {
				if err := c.fold(ctx, &e, m, v, depth); err != nil {
					return nil, err
				}
			}
		case chat.RoleAssistant:
			// Its text was said in the chat; its calls' arguments may
			// hold what the model copied.
			for _, tc := range m.ToolCalls {
				a := pretty(tc.Arguments)
				if e.Hidden != "" {
					a = ""
				}
				e.Calls = append(e.Calls, call{Name: tc.Name, Arguments: a})
			}
			if m.Ask != "" && e.Hidden == "" {
				if a, err := c.d.Store.ApprovalByID(ctx, m.Ask); err == nil {
					e.Approval = &a
				}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// fold puts the steps of the sub-agent a delegate result names (its
// "session") under e.
func (c *Console) fold(ctx context.Context, e *entry, m chat.Message, v viewer, depth int) error {
	var res struct {
		Session int64 `json:"session"`
	}
	if json.Unmarshal([]byte(m.Text), &res) != nil || res.Session == 0 {
		return nil
	}
	steps, err := c.d.Store.Recent(ctx, res.Session, messagesShown)
	if err != nil || len(steps) == 0 {
		return err
	}
	if owner := steps[0].UserKey; !v.Admin && owner != v.UserKey {
		e.StepsOf = owner
		return nil
	}
	e.Steps, err = c.entries(ctx, steps, v, depth+1)
	return err
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
