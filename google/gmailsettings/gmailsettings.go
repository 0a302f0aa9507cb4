// Package gmailsettings is the google_gmail_settings tool group: filters,
// the vacation responder, signatures and forwarding addresses of the
// calling person's Gmail.
package gmailsettings

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	gmailapi "google.golang.org/api/gmail/v1"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_gmail_settings"

// Service is the Gmail API with the scopes the group needs: basic
// settings, and labels to turn label names in filters into ids.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "", Scopes: []string{gmailapi.GmailSettingsBasicScope, gmailapi.GmailLabelsScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors.
	Backoff backoff.Policy
}

// New returns the google_gmail_settings group, its tools and scopes,
// acting as the calling person through c.
func New(c google.Client, o Options) google.Group {
	s := &settings{api: google.API[gmailapi.Service]{Client: c, Service: Service(), New: gmailapi.NewService, Backoff: o.Backoff}}
	return google.Group{Examples: examples, Group: tools.Group{
		Name:        GroupName,
		DisplayName: "Google Gmail settings",
		Description: "Gmail settings: filters, vacation auto-reply, signature, forwarding.",
	}, Scopes: Service().Scopes, Tools: []tools.Tool{
		tools.New(tools.Definition{Name: "gmail_list_filters", Description: "List the mailbox's filters with their criteria and actions.", ReadOnly: true}, s.listFilters),
		tools.New(tools.Definition{Name: "gmail_create_filter", Description: "Create a filter: match by from/to/subject/query, then label, archive, mark read, star, trash or forward.",
			// Forwarding sends the person's mail to someone else.
			EffectFor: tools.By(func(_ context.Context, in createFilterIn) tools.Effect {
				if strings.TrimSpace(in.Forward) != "" {
					return tools.EffectDestructive
				}
				return tools.EffectMutate
			}),
			Summarize: tools.By(summarizeFilter)}, s.createFilter),
		tools.New(tools.Definition{Name: "gmail_delete_filter", Description: "Delete a filter by id.", Effect: tools.EffectDestructive,
			Summarize: tools.By(func(_ context.Context, in deleteFilterIn) string {
				return fmt.Sprintf("Delete the Gmail filter %s: mail it labelled, archived or forwarded is handled as usual again", strings.TrimSpace(in.FilterID))
			})}, s.deleteFilter),
		tools.New(tools.Definition{Name: "gmail_get_vacation", Description: "Show the vacation auto-reply settings.", ReadOnly: true}, s.getVacation),
		tools.New(tools.Definition{Name: "gmail_set_vacation", Description: "Turn the vacation auto-reply on (with subject, text and optional dates) or off.",
			Effect: tools.EffectDestructive, Summarize: tools.By(summarizeVacation),
			// An auto-reply answers whoever writes: no list of addresses
			// can say whom.
			Reaches: tools.By(func(_ context.Context, in setVacationIn) tools.Reach {
				if in.Enabled {
					return tools.UnknownReach("everyone who writes to the person while it is on")
				}
				return tools.Reach{}
			})}, s.setVacation),
		tools.New(tools.Definition{Name: "gmail_get_signature", Description: "Show the signature of the default send-as address (or a given one).", ReadOnly: true}, s.getSignature),
		tools.New(tools.Definition{Name: "gmail_update_signature", Description: "Replace the signature of the default send-as address (or a given one).",
			Summarize: tools.By(func(_ context.Context, in updateSignatureIn) string {
				of := cmp.Or(strings.TrimSpace(in.SendAsEmail), "the default send-as address")
				if strings.TrimSpace(in.Signature) == "" {
					return "Remove the signature of " + of
				}
				return fmt.Sprintf("Set the signature of %s to '%s'", of, tools.Shorten(in.Signature, 80))
			})}, s.updateSignature),
		tools.New(tools.Definition{Name: "gmail_list_forwarding_addresses", Description: "List the forwarding addresses and whether each is verified.", ReadOnly: true}, s.listForwarding),
	}}
}

type settings struct {
	api google.API[gmailapi.Service]
}

type filter struct {
	ID     string         `json:"id"`
	Match  map[string]any `json:"match"`
	Action map[string]any `json:"action"`
}

func toFilter(f *gmailapi.Filter, names map[string]string) filter {
	out := filter{ID: f.Id, Match: map[string]any{}, Action: map[string]any{}}
	if c := f.Criteria; c != nil {
		put(out.Match, "from", c.From)
		put(out.Match, "to", c.To)
		put(out.Match, "subject", c.Subject)
		put(out.Match, "query", c.Query)
		put(out.Match, "negated_query", c.NegatedQuery)
		if c.HasAttachment {
			out.Match["has_attachment"] = true
		}
	}
	if a := f.Action; a != nil {
		var add []string
		for _, id := range a.AddLabelIds {
			switch id {
			case "STARRED":
				out.Action["star"] = true
			case "TRASH":
				out.Action["trash"] = true
			case "IMPORTANT":
				out.Action["mark_important"] = true
			default:
				add = append(add, nameOf(id, names))
			}
		}
		for _, id := range a.RemoveLabelIds {
			switch id {
			case "INBOX":
				out.Action["archive"] = true
			case "UNREAD":
				out.Action["mark_read"] = true
			case "SPAM":
				out.Action["never_spam"] = true
			}
		}
		if len(add) > 0 {
			out.Action["add_labels"] = add
		}
		put(out.Action, "forward", a.Forward)
	}
	return out
}

func put(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func nameOf(id string, names map[string]string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return id
}

// labels lists the mailbox's labels, to turn label names into ids and
// back.
func (s *settings) labels(ctx context.Context, svc *gmailapi.Service) ([]*gmailapi.Label, error) {
	var res *gmailapi.ListLabelsResponse
	err := s.api.Call(ctx, "the labels", func() (err error) {
		res, err = svc.Users.Labels.List("me").Context(ctx).Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	return res.Labels, nil
}

func (s *settings) listFilters(ctx context.Context, _ struct{}) (any, error) {
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var res *gmailapi.ListFiltersResponse
	if err := s.api.Call(ctx, "the filters", func() (err error) {
		res, err = svc.Users.Settings.Filters.List("me").Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	names := map[string]string{}
	if len(res.Filter) > 0 {
		ls, err := s.labels(ctx, svc)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			names[l.Id] = l.Name
		}
	}
	out := make([]filter, 0, len(res.Filter))
	for _, f := range res.Filter {
		out = append(out, toFilter(f, names))
	}
	return map[string]any{"filters": out}, nil
}

type createFilterIn struct {
	From          string   `json:"from,omitempty" desc:"sender address or name to match"`
	To            string   `json:"to,omitempty" reach:"-"`
	Subject       string   `json:"subject,omitempty" desc:"words in the subject"`
	Query         string   `json:"query,omitempty" desc:"Gmail search query the message must match"`
	HasAttachment bool     `json:"has_attachment,omitempty"`
	AddLabels     []string `json:"add_labels,omitempty" desc:"label names (or ids) to apply"`
	Archive       bool     `json:"archive,omitempty" desc:"skip the inbox"`
	MarkRead      bool     `json:"mark_read,omitempty"`
	Star          bool     `json:"star,omitempty"`
	Trash         bool     `json:"trash,omitempty"`
	Forward       string   `json:"forward,omitempty" desc:"a verified forwarding address" reach:"recipients"`
}

// summarizeFilter says what a new filter matches and does, naming the
// address it forwards to first.
func summarizeFilter(_ context.Context, in createFilterIn) string {
	var match, do []string
	for _, c := range []struct{ label, v string }{{"from", in.From}, {"to", in.To}, {"subject", in.Subject}, {"matching", in.Query}} {
		if v := strings.TrimSpace(c.v); v != "" {
			match = append(match, fmt.Sprintf("%s '%s'", c.label, tools.Shorten(v, 200)))
		}
	}
	if in.HasAttachment {
		match = append(match, "with an attachment")
	}
	if f := strings.TrimSpace(in.Forward); f != "" {
		do = append(do, "forward it to "+f)
	}
	if len(in.AddLabels) > 0 {
		do = append(do, "label it "+tools.Names(in.AddLabels, 5))
	}
	for _, a := range []struct {
		on   bool
		verb string
	}{{in.Archive, "archive it"}, {in.MarkRead, "mark it read"}, {in.Star, "star it"}, {in.Trash, "move it to the trash"}} {
		if a.on {
			do = append(do, a.verb)
		}
	}
	if len(do) == 0 {
		do = append(do, "do nothing")
	}
	return fmt.Sprintf("Create a Gmail filter: for mail %s, %s", strings.Join(match, ", "), strings.Join(do, ", "))
}

func (s *settings) createFilter(ctx context.Context, in createFilterIn) (any, error) {
	crit := &gmailapi.FilterCriteria{From: in.From, To: in.To, Subject: in.Subject, Query: in.Query, HasAttachment: in.HasAttachment}
	if in.From+in.To+in.Subject+in.Query == "" && !in.HasAttachment {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "A filter needs something to match: from, to, subject, query or has_attachment."}
	}
	act := &gmailapi.FilterAction{Forward: strings.TrimSpace(in.Forward)}
	if in.Archive {
		act.RemoveLabelIds = append(act.RemoveLabelIds, "INBOX")
	}
	if in.MarkRead {
		act.RemoveLabelIds = append(act.RemoveLabelIds, "UNREAD")
	}
	if in.Star {
		act.AddLabelIds = append(act.AddLabelIds, "STARRED")
	}
	if in.Trash {
		act.AddLabelIds = append(act.AddLabelIds, "TRASH")
	}
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	if len(in.AddLabels) > 0 {
		ls, err := s.labels(ctx, svc)
		if err != nil {
			return nil, err
		}
		var unknown, known []string
		for _, want := range in.AddLabels {
			id := ""
			for _, l := range ls {
				if l.Id == want || strings.EqualFold(l.Name, want) {
					id = l.Id
					names[l.Id] = l.Name
				}
			}
			if id == "" {
				unknown = append(unknown, want)
			}
			act.AddLabelIds = append(act.AddLabelIds, id)
		}
		if len(unknown) > 0 {
			for _, l := range ls {
				if l.Type == "user" {
					known = append(known, l.Name)
				}
			}
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: "No label named " + strings.Join(unknown, ", ") + ".",
				Suggestion: "Use an existing label, or ask the person to create it in Gmail first.", Details: map[string]any{"labels": known}}
		}
	}
	if len(act.AddLabelIds)+len(act.RemoveLabelIds) == 0 && act.Forward == "" {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "A filter needs an action: add_labels, archive, mark_read, star, trash or forward."}
	}
	var f *gmailapi.Filter
	if err := s.api.Call(ctx, "the filter", func() (err error) {
		f, err = svc.Users.Settings.Filters.Create("me", &gmailapi.Filter{Criteria: crit, Action: act}).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "created", "filter": toFilter(f, names)}, nil
}

type deleteFilterIn struct {
	FilterID string `json:"filter_id" desc:"id from gmail_list_filters"`
}

func (s *settings) deleteFilter(ctx context.Context, in deleteFilterIn) (any, error) {
	if strings.TrimSpace(in.FilterID) == "" {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "filter_id is required.", Suggestion: "List the filters first."}
	}
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.api.Call(ctx, "filter "+in.FilterID, func() error {
		return svc.Users.Settings.Filters.Delete("me", in.FilterID).Context(ctx).Do()
	}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "deleted", "filter_id": in.FilterID}, nil
}

type vacation struct {
	Enabled      bool   `json:"enabled"`
	Subject      string `json:"subject,omitempty"`
	Body         string `json:"body,omitempty"`
	Start        string `json:"start,omitempty"`
	End          string `json:"end,omitempty"`
	ContactsOnly bool   `json:"contacts_only,omitempty"`
	DomainOnly   bool   `json:"domain_only,omitempty"`
}

func (s *settings) getVacation(ctx context.Context, _ struct{}) (any, error) {
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var v *gmailapi.VacationSettings
	if err := s.api.Call(ctx, "the vacation responder", func() (err error) {
		v, err = svc.Users.Settings.GetVacation("me").Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	out := vacation{Enabled: v.EnableAutoReply, Subject: v.ResponseSubject, Body: v.ResponseBodyPlainText,
		ContactsOnly: v.RestrictToContacts, DomainOnly: v.RestrictToDomain}
	if out.Body == "" {
		out.Body = v.ResponseBodyHtml
	}
	if v.StartTime > 0 {
		out.Start = time.UnixMilli(v.StartTime).UTC().Format(time.RFC3339)
	}
	if v.EndTime > 0 {
		out.End = time.UnixMilli(v.EndTime).UTC().Format(time.RFC3339)
	}
	return out, nil
}

type setVacationIn struct {
	Enabled      bool   `json:"enabled" desc:"true to turn the auto-reply on, false to turn it off"`
	Subject      string `json:"subject,omitempty"`
	Body         string `json:"body,omitempty" desc:"plain text of the auto-reply; required when enabling"`
	Start        string `json:"start,omitempty" desc:"RFC 3339 time or YYYY-MM-DD (UTC) when replies start; default now"`
	End          string `json:"end,omitempty" desc:"RFC 3339 time or YYYY-MM-DD (UTC) when replies stop; default never"`
	ContactsOnly bool   `json:"contacts_only,omitempty" desc:"reply only to people in the person's contacts"`
	DomainOnly   bool   `json:"domain_only,omitempty" desc:"reply only to people in the same Workspace domain"`
}

// summarizeVacation says whom an auto-reply answers, from when to when,
// and with what.
func summarizeVacation(_ context.Context, in setVacationIn) string {
	if !in.Enabled {
		return "Turn off the Gmail vacation auto-reply"
	}
	who := "everyone who writes"
	switch {
	case in.ContactsOnly && in.DomainOnly:
		who = "the person's contacts in their domain"
	case in.ContactsOnly:
		who = "the person's contacts"
	case in.DomainOnly:
		who = "people in the person's domain"
	}
	when := " from now"
	if in.Start != "" {
		when = " from " + in.Start
	}
	if in.End != "" {
		when += " until " + in.End
	} else {
		when += ", until turned off"
	}
	return fmt.Sprintf("Turn on the Gmail vacation auto-reply, answering %s%s with '%s': %s", who, when,
		tools.Shorten(in.Subject, 80), tools.Shorten(in.Body, 120))
}

func parseWhen(field, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("%s: %q is not a date like 2026-07-01 or 2026-07-01T09:00:00+02:00.", field, s)}
}

func (s *settings) setVacation(ctx context.Context, in setVacationIn) (any, error) {
	v := &gmailapi.VacationSettings{EnableAutoReply: in.Enabled, ResponseSubject: in.Subject, ResponseBodyPlainText: in.Body,
		RestrictToContacts: in.ContactsOnly, RestrictToDomain: in.DomainOnly, ForceSendFields: []string{"EnableAutoReply"}}
	if in.Enabled && strings.TrimSpace(in.Body) == "" {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "body is required to turn the auto-reply on."}
	}
	var err error
	if v.StartTime, err = parseWhen("start", in.Start); err != nil {
		return nil, err
	}
	if v.EndTime, err = parseWhen("end", in.End); err != nil {
		return nil, err
	}
	if v.StartTime > 0 && v.EndTime > 0 && v.EndTime <= v.StartTime {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: "end must be after start."}
	}
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.api.Call(ctx, "the vacation responder", func() (err error) {
		v, err = svc.Users.Settings.UpdateVacation("me", v).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	status := "auto-reply off"
	if v.EnableAutoReply {
		status = "auto-reply on"
	}
	return map[string]any{"status": status}, nil
}

type signatureIn struct {
	SendAsEmail string `json:"send_as_email,omitempty" desc:"the address whose signature to use; default the default send-as address" reach:"-"`
}

// sendAs finds the given address, or the default one.
func (s *settings) sendAs(ctx context.Context, svc *gmailapi.Service, email string) (*gmailapi.SendAs, error) {
	var res *gmailapi.ListSendAsResponse
	if err := s.api.Call(ctx, "the send-as addresses", func() (err error) {
		res, err = svc.Users.Settings.SendAs.List("me").Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	var addrs []string
	for _, a := range res.SendAs {
		if (email == "" && a.IsDefault) || (email != "" && strings.EqualFold(a.SendAsEmail, email)) {
			return a, nil
		}
		addrs = append(addrs, a.SendAsEmail)
	}
	if email == "" && len(res.SendAs) > 0 {
		return res.SendAs[0], nil
	}
	return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("No send-as address %q.", email),
		Suggestion: "Use one of the person's addresses.", Details: map[string]any{"send_as": addrs}}
}

func (s *settings) getSignature(ctx context.Context, in signatureIn) (any, error) {
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	a, err := s.sendAs(ctx, svc, in.SendAsEmail)
	if err != nil {
		return nil, err
	}
	return map[string]any{"send_as_email": a.SendAsEmail, "display_name": a.DisplayName, "signature": a.Signature}, nil
}

type updateSignatureIn struct {
	Signature   string `json:"signature" desc:"the new signature; simple HTML allowed; empty removes it"`
	SendAsEmail string `json:"send_as_email,omitempty" desc:"default the default send-as address" reach:"-"`
}

func (s *settings) updateSignature(ctx context.Context, in updateSignatureIn) (any, error) {
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	a, err := s.sendAs(ctx, svc, in.SendAsEmail)
	if err != nil {
		return nil, err
	}
	var res *gmailapi.SendAs
	if err := s.api.Call(ctx, "the signature", func() (err error) {
		res, err = svc.Users.Settings.SendAs.Patch("me", a.SendAsEmail, &gmailapi.SendAs{Signature: in.Signature, ForceSendFields: []string{"Signature"}}).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "signature updated", "send_as_email": res.SendAsEmail, "signature": res.Signature}, nil
}

func (s *settings) listForwarding(ctx context.Context, _ struct{}) (any, error) {
	svc, err := s.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var res *gmailapi.ListForwardingAddressesResponse
	if err := s.api.Call(ctx, "the forwarding addresses", func() (err error) {
		res, err = svc.Users.Settings.ForwardingAddresses.List("me").Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	type addr struct {
		Email    string `json:"email"`
		Verified bool   `json:"verified"`
		Status   string `json:"status"`
	}
	out := []addr{}
	for _, f := range res.ForwardingAddresses {
		out = append(out, addr{Email: f.ForwardingEmail, Verified: f.VerificationStatus == "accepted", Status: f.VerificationStatus})
	}
	return map[string]any{"forwarding_addresses": out}, nil
}
