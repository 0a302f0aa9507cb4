// Package gmail is the google_gmail tool group: search, read, send, reply,
// drafts, labels, archive and trash in the calling person's mailbox.
package gmail

import (
	"context"
	"errors"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"

	gmailapi "google.golang.org/api/gmail/v1"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
	"loadout/tools/pdf"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_gmail"

// Service is the Gmail API with the scope the group needs: gmail.modify
// covers reading, sending, drafts, labels and trash (not deleting forever).
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "", Scopes: []string{gmailapi.GmailModifyScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors; the zero value is
	// google.Retry's defaults.
	Backoff backoff.Policy
	// Send is SendMail (the default) or SendDraft: sends and replies
	// become drafts the person sends from Gmail themselves.
	Send string
	// PDF bounds the worker a PDF attachment is read in; its Slots are
	// the process's, shared with the pdf tools.
	PDF pdf.Limits
}

// Modes of Options.Send (google.gmail.send).
const (
	SendMail  = "send"
	SendDraft = "draft"
)

// maxBody caps the text of a message returned by gmail_read.
const maxBody = 12000

// New returns the google_gmail group, its tools and scopes, acting as the
// calling person through c.
func New(c google.Client, o Options) google.Group {
	m := &mailbox{mode: o.Send, pdf: o.PDF, api: google.API[gmailapi.Service]{Client: c, Service: Service(), New: gmailapi.NewService, Backoff: o.Backoff}}
	// What goes to other people waits for the person's approval; in
	// draft-only mode nothing does, and a draft is the person's own.
	outbound := tools.EffectDestructive
	if o.Send == SendDraft {
		outbound = tools.EffectMutate
	}
	g := tools.Group{
		Name:        GroupName,
		DisplayName: "Google Gmail",
		Description: "The person's Gmail: search, read, send, reply, drafts, labels, archive, trash.",
	}
	return google.Group{Examples: examples, Group: g, Scopes: Service().Scopes, Tools: []tools.Tool{
		tools.New(tools.Definition{
			Name:        "gmail_search",
			Description: "Search the person's mail with Gmail query syntax (from:, to:, subject:, is:unread, has:attachment, newer_than:7d, label:, in:inbox). Returns ids, senders, subjects, dates and snippets.",
			ReadOnly:    true, Untrusted: true,
		}, m.search),
		tools.New(tools.Definition{
			Name:        "gmail_read",
			Description: "Read one message: headers, text body (HTML turned into text) and attachment list; or one attachment's content.",
			ReadOnly:    true, Untrusted: true,
		}, m.read),
		tools.New(tools.Definition{
			Name:        "gmail_send",
			Description: "Send a new plain-text email from the person's account.",
			Effect:      outbound, Summarize: tools.By(summarizeSend),
		}, m.send),
		tools.New(tools.Definition{
			Name:        "gmail_reply",
			Description: "Reply in the same thread to a message (to its sender, or to everyone with reply_all).",
			Effect:      outbound, Summarize: tools.By(m.summarizeReply),
			Reaches: tools.By(m.reachReply),
		}, m.reply),
		tools.New(tools.Definition{
			Name:        "gmail_create_draft",
			Description: "Save a draft (new mail, or a reply when reply_to_message_id is set) without sending it.",
		}, m.createDraft),
		tools.New(tools.Definition{
			Name:        "gmail_send_draft",
			Description: "Send an existing draft by its draft id.",
			Effect:      outbound,
			Summarize:   tools.By(m.summarizeSendDraft),
			Reaches:     tools.By(m.reachSendDraft),
		}, m.sendDraft),
		tools.New(tools.Definition{
			Name:        "gmail_list_labels",
			Description: "List the mailbox's labels (system and the person's own) with their ids.",
			ReadOnly:    true, Untrusted: true,
		}, m.listLabels),
		tools.New(tools.Definition{
			Name:        "gmail_modify_labels",
			Description: "Add and/or remove labels (by name or id, e.g. STARRED, UNREAD, IMPORTANT, or a user label) on messages.",
		}, m.modifyLabels),
		tools.New(tools.Definition{
			Name:        "gmail_archive",
			Description: "Archive messages: take them out of the inbox (they stay searchable).",
		}, m.archive),
		tools.New(tools.Definition{
			Name:        "gmail_trash",
			Description: "Move messages to the trash (Gmail deletes them after 30 days).",
			Effect:      tools.EffectDestructive,
			Summarize: tools.By(func(_ context.Context, in idsIn) string {
				return fmt.Sprintf("Move %s to the Gmail trash (%s)", plural(len(in.MessageIDs), "message"), tools.Shorten(strings.Join(in.MessageIDs, ", "), 80))
			}),
		}, m.trash),
	}}
}

type mailbox struct {
	mode string     // Options.Send
	pdf  pdf.Limits // Options.PDF
	api  google.API[gmailapi.Service]
}

// summary is a message as a search lists it.
type summary struct {
	ID       string   `json:"id"`
	ThreadID string   `json:"thread_id"`
	From     string   `json:"from,omitempty"`
	To       string   `json:"to,omitempty"`
	Subject  string   `json:"subject"`
	Date     string   `json:"date,omitempty"`
	Snippet  string   `json:"snippet,omitempty"`
	Labels   []string `json:"labels,omitempty"`
	Unread   bool     `json:"unread,omitempty"`
	Link     string   `json:"link"`
}

func headerOf(p *gmailapi.MessagePart, name string) string {
	if p == nil {
		return ""
	}
	for _, h := range p.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// threadLink opens a thread in Gmail.
func threadLink(id string) string { return "https://mail.google.com/mail/u/0/#all/" + id }

func summarize(msg *gmailapi.Message) summary {
	s := summary{
		ID: msg.Id, ThreadID: msg.ThreadId,
		From: headerOf(msg.Payload, "From"), To: headerOf(msg.Payload, "To"),
		Subject: headerOf(msg.Payload, "Subject"),
		Snippet: html.UnescapeString(msg.Snippet), Labels: msg.LabelIds,
		Unread: slices.Contains(msg.LabelIds, "UNREAD"),
		Link:   threadLink(msg.ThreadId),
	}
	if msg.InternalDate > 0 {
		s.Date = time.UnixMilli(msg.InternalDate).UTC().Format(time.RFC3339)
	} else if d := headerOf(msg.Payload, "Date"); d != "" {
		s.Date = d
	}
	return s
}

type searchIn struct {
	Query      string `json:"query,omitempty" desc:"Gmail search query, e.g. 'from:ana@example.com is:unread newer_than:7d'; empty lists the inbox"`
	MaxResults int    `json:"max_results,omitempty" desc:"page size, 1-50; default 10"`
	PageToken  string `json:"page_token,omitempty" desc:"next_page_token of a previous search, for the next page"`
}

type searchOut struct {
	Messages      []summary `json:"messages"`
	NextPageToken string    `json:"next_page_token,omitempty"`
	Estimate      int64     `json:"result_size_estimate"`
}

func (m *mailbox) search(ctx context.Context, in searchIn) (any, error) {
	if in.MaxResults < 0 || in.MaxResults > 50 {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("max_results must be between 1 and 50, got %d.", in.MaxResults)}
	}
	if in.MaxResults == 0 {
		in.MaxResults = 10
	}
	q := strings.TrimSpace(in.Query)
	if q == "" {
		q = "in:inbox"
	}
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var list *gmailapi.ListMessagesResponse
	err = m.api.Call(ctx, "the search", func() error {
		c := svc.Users.Messages.List("me").Q(q).MaxResults(int64(in.MaxResults)).Context(ctx)
		if in.PageToken != "" {
			c = c.PageToken(in.PageToken)
		}
		list, err = c.Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := searchOut{Messages: []summary{}, NextPageToken: list.NextPageToken, Estimate: list.ResultSizeEstimate}
	for _, ref := range list.Messages {
		var msg *gmailapi.Message
		err := m.api.Call(ctx, "message "+ref.Id, func() error {
			msg, err = svc.Users.Messages.Get("me", ref.Id).Format("metadata").
				MetadataHeaders("From", "To", "Subject", "Date").Context(ctx).Do()
			return err
		})
		var te *tools.Error
		if errors.As(err, &te) && te.Code == tools.CodeNotFound {
			continue // deleted between list and get
		}
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, summarize(msg))
	}
	return out, nil
}

type readIn struct {
	MessageID  string `json:"message_id" desc:"id from gmail_search"`
	Attachment string `json:"attachment,omitempty" desc:"read this attachment (its filename or attachment_id) instead of the message"`
}

type readOut struct {
	summary
	Cc          string       `json:"cc,omitempty"`
	ReplyTo     string       `json:"reply_to,omitempty"`
	Body        string       `json:"body"`
	Truncated   bool         `json:"body_truncated,omitempty"`
	Attachments []attachment `json:"attachments,omitempty"`
}

func (m *mailbox) read(ctx context.Context, in readIn) (any, error) {
	if err := google.Required("message_id", in.MessageID); err != nil {
		return nil, err
	}
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var msg *gmailapi.Message
	err = m.api.Call(ctx, "message "+in.MessageID, func() error {
		msg, err = svc.Users.Messages.Get("me", in.MessageID).Format("full").Context(ctx).Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	var ps parts
	ps.walk(msg.Payload)
	if in.Attachment != "" {
		return m.readAttachment(ctx, svc, in.MessageID, in.Attachment, ps.attachments)
	}
	out := readOut{
		summary: summarize(msg), Cc: headerOf(msg.Payload, "Cc"), ReplyTo: headerOf(msg.Payload, "Reply-To"),
		Body: ps.text(), Attachments: ps.attachments,
	}
	out.Snippet = ""
	if r := []rune(out.Body); len(r) > maxBody {
		out.Body, out.Truncated = string(r[:maxBody]), true
	}
	return out, nil
}

// maxAttachment is the largest attachment read; maxAttachmentChars caps
// the text returned from one.
const (
	maxAttachment      = 20 << 20
	maxAttachmentChars = 30000
)

// attachmentOut is an attachment as gmail_read returns it: text types as
// text, PDFs as their text, anything else described.
type attachmentOut struct {
	Filename  string `json:"filename"`
	MimeType  string `json:"mime_type"`
	Size      int64  `json:"size"`
	Text      string `json:"text,omitempty"`
	Truncated bool   `json:"text_truncated,omitempty"`
	Note      string `json:"note,omitempty"`
}

// readAttachment reads the attachment of message id named by want (its
// filename, case aside, or its attachment id).
func (m *mailbox) readAttachment(ctx context.Context, svc *gmailapi.Service, id, want string, atts []attachment) (any, error) {
	var a *attachment
	for i := range atts {
		if atts[i].AttachmentID == want || strings.EqualFold(atts[i].Filename, want) {
			a = &atts[i]
			break
		}
	}
	if a == nil {
		names := make([]string, len(atts))
		for i, at := range atts {
			names[i] = at.Filename
		}
		return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("Message %s has no attachment '%s'.", id, want),
			Suggestion: "Use one of its attachments: " + strings.Join(names, ", "), Details: map[string]any{"attachments": names}}
	}
	out := attachmentOut{Filename: a.Filename, MimeType: a.MimeType, Size: a.Size}
	mt := strings.ToLower(a.MimeType)
	textual := strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+xml") || strings.HasSuffix(mt, "/xml") || mt == "application/csv"
	isPDF := mt == "application/pdf" || strings.HasSuffix(strings.ToLower(a.Filename), ".pdf")
	switch {
	case !textual && !isPDF:
		out.Note = "Not a text or PDF file, so only its description is shown."
		return out, nil
	case a.Size > maxAttachment:
		out.Note = fmt.Sprintf("Larger than %d MB, so it is not read here.", maxAttachment>>20)
		return out, nil
	}
	var body *gmailapi.MessagePartBody
	if err := m.api.Call(ctx, "attachment "+a.Filename, func() (err error) {
		body, err = svc.Users.Messages.Attachments.Get("me", id, a.AttachmentID).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	data, err := decodeBytes(body.Data)
	if err != nil {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("The attachment '%s' could not be decoded.", a.Filename)}
	}
	var text string
	if isPDF {
		if text, err = pdf.Text(ctx, data, a.Filename, maxAttachmentChars, m.pdf); err != nil {
			return nil, err
		}
	} else {
		text = strings.ToValidUTF8(string(data), "\uFFFD")
	}
	if r := []rune(text); len(r) > maxAttachmentChars {
		text, out.Truncated = string(r[:maxAttachmentChars]), true
	}
	out.Text = text
	return out, nil
}
