package gmail

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gmailapi "google.golang.org/api/gmail/v1"

	"loadout/tools"
)

type label struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (m *mailbox) labels(ctx context.Context, svc *gmailapi.Service) ([]label, error) {
	var res *gmailapi.ListLabelsResponse
	err := m.api.Call(ctx, "the labels", func() (err error) {
		res, err = svc.Users.Labels.List("me").Context(ctx).Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]label, 0, len(res.Labels))
	for _, l := range res.Labels {
		out = append(out, label{ID: l.Id, Name: l.Name, Type: l.Type})
	}
	return out, nil
}

func (m *mailbox) listLabels(ctx context.Context, _ struct{}) (any, error) {
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ls, err := m.labels(ctx, svc)
	if err != nil {
		return nil, err
	}
	return map[string]any{"labels": ls}, nil
}

type modifyIn struct {
	MessageIDs []string `json:"message_ids" desc:"ids from gmail_search"`
	Add        []string `json:"add,omitempty" desc:"label names or ids to add, e.g. STARRED or 'Receipts'"`
	Remove     []string `json:"remove,omitempty" desc:"label names or ids to remove, e.g. UNREAD to mark read"`
}

// resolve maps label names (any case) or ids to ids.
func resolve(all []label, names []string) ([]string, error) {
	var ids, unknown []string
	for _, n := range names {
		found := ""
		for _, l := range all {
			if l.ID == n || strings.EqualFold(l.Name, n) || strings.EqualFold(l.ID, n) {
				found = l.ID
				break
			}
		}
		if found == "" {
			unknown = append(unknown, n)
			continue
		}
		ids = append(ids, found)
	}
	if len(unknown) > 0 {
		known := make([]string, len(all))
		for i, l := range all {
			known[i] = l.Name
		}
		return nil, &tools.Error{
			Code:       tools.CodeInvalidArgument,
			Message:    fmt.Sprintf("No label named %s.", strings.Join(unknown, ", ")),
			Suggestion: "Use one of the existing labels.",
			Details:    map[string]any{"labels": known},
		}
	}
	return ids, nil
}

func (m *mailbox) modifyLabels(ctx context.Context, in modifyIn) (any, error) {
	if len(in.Add)+len(in.Remove) == 0 {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Give labels to add or remove."}
	}
	if err := requiredIDs(in.MessageIDs); err != nil {
		return nil, err
	}
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	all, err := m.labels(ctx, svc)
	if err != nil {
		return nil, err
	}
	add, err := resolve(all, in.Add)
	if err != nil {
		return nil, err
	}
	remove, err := resolve(all, in.Remove)
	if err != nil {
		return nil, err
	}
	if err := m.batchModify(ctx, svc, in.MessageIDs, add, remove); err != nil {
		return nil, err
	}
	return map[string]any{"status": "labels changed", "messages": len(in.MessageIDs), "added": add, "removed": remove}, nil
}

func (m *mailbox) batchModify(ctx context.Context, svc *gmailapi.Service, ids, add, remove []string) error {
	return m.api.Call(ctx, "the messages", func() error {
		return svc.Users.Messages.BatchModify("me", &gmailapi.BatchModifyMessagesRequest{
			Ids: ids, AddLabelIds: add, RemoveLabelIds: remove,
		}).Context(ctx).Do()
	})
}

type idsIn struct {
	MessageIDs []string `json:"message_ids" desc:"ids from gmail_search"`
}

func (m *mailbox) archive(ctx context.Context, in idsIn) (any, error) {
	if err := requiredIDs(in.MessageIDs); err != nil {
		return nil, err
	}
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.batchModify(ctx, svc, in.MessageIDs, nil, []string{"INBOX"}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "archived", "messages": len(in.MessageIDs)}, nil
}

func (m *mailbox) trash(ctx context.Context, in idsIn) (any, error) {
	if err := requiredIDs(in.MessageIDs); err != nil {
		return nil, err
	}
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, id := range in.MessageIDs {
		err := m.api.Call(ctx, "message "+id, func() error {
			_, err := svc.Users.Messages.Trash("me", id).Context(ctx).Do()
			return err
		})
		if err != nil {
			var te *tools.Error
			if len(done) > 0 && errors.As(err, &te) {
				te.Details = map[string]any{"trashed": done}
			}
			return nil, err
		}
		done = append(done, id)
	}
	return map[string]any{"status": "trashed", "messages": len(done)}, nil
}

func requiredIDs(ids []string) error {
	if len(ids) == 0 {
		return &tools.Error{Code: tools.CodeMissingParameter, Message: "message_ids needs at least one id.", Suggestion: "Search first with gmail_search to get ids."}
	}
	if len(ids) > 1000 {
		return &tools.Error{Code: tools.CodeInvalidArgument, Message: "At most 1000 messages at a time."}
	}
	return nil
}
