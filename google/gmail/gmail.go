// Package gmail is the google_gmail tool group: search, read, send, reply,
// drafts, labels, archive and trash in the calling person's mailbox.
package gmail

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/mail"
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
	m := &mailbox{mode: o.Send, api: google.API[gmailapi.Service]{Client: c, Service: Service(), New: gmailapi.NewService, Backoff: o.Backoff}}
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
	mode string // Options.Send
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
		if text, err = pdf.Text(ctx, data, a.Filename, maxAttachmentChars, pdf.Limits{}); err != nil {
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

type sendIn struct {
	To       string `json:"to" desc:"recipients, comma-separated: 'ana@example.com, Bob Ng <bob@example.com>'"`
	Cc       string `json:"cc,omitempty" desc:"comma-separated"`
	Bcc      string `json:"bcc,omitempty" desc:"comma-separated"`
	Subject  string `json:"subject"`
	Body     string `json:"body" desc:"plain text, or Markdown with markdown: true"`
	Markdown bool   `json:"markdown,omitempty" desc:"also send the body as HTML rendered from its Markdown"`
}

type sentOut struct {
	Status   string `json:"status"`
	ID       string `json:"id"`
	ThreadID string `json:"thread_id"`
	Link     string `json:"link"`
}

// sentOf is a sent message as gmail_send, gmail_reply and
// gmail_send_draft return it.
func sentOf(msg *gmailapi.Message) sentOut {
	return sentOut{Status: "sent", ID: msg.Id, ThreadID: msg.ThreadId, Link: threadLink(msg.ThreadId)}
}

func (in sendIn) outgoing() (outgoing, error) {
	to, err := parseAddresses("to", in.To)
	if err != nil {
		return outgoing{}, err
	}
	cc, err := parseAddresses("cc", in.Cc)
	if err != nil {
		return outgoing{}, err
	}
	bcc, err := parseAddresses("bcc", in.Bcc)
	if err != nil {
		return outgoing{}, err
	}
	if len(to)+len(cc)+len(bcc) == 0 {
		return outgoing{}, &tools.Error{Code: tools.CodeMissingParameter, Message: "to: at least one recipient is needed."}
	}
	return outgoing{To: to, Cc: cc, Bcc: bcc, Subject: in.Subject, Body: in.Body, Markdown: in.Markdown}, nil
}

func (m *mailbox) send(ctx context.Context, in sendIn) (any, error) {
	if m.mode == SendDraft {
		return insteadOfSending(m.createDraft(ctx, draftIn{To: in.To, Cc: in.Cc, Bcc: in.Bcc, Subject: in.Subject, Body: in.Body, Markdown: in.Markdown}))
	}
	out, err := in.outgoing()
	if err != nil {
		return nil, err
	}
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return m.sendMessage(ctx, svc, &gmailapi.Message{Raw: out.raw()})
}

// insteadOfSending marks a draft saved in place of a send (draft-only
// mode), so the model tells the person nothing was sent.
func insteadOfSending(res any, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	d := res.(draftOut)
	d.Status = draftOnly
	return d, nil
}

// summarizeSend is what the person approves for gmail_send: every
// recipient, by the address the mail goes to (a display name can claim
// to be anyone), as the send parses them.
func summarizeSend(_ context.Context, in sendIn) string {
	out, err := in.outgoing()
	if err != nil {
		return "Send an email (its recipients cannot be read: " + tools.Shorten(err.Error(), 120) + ")"
	}
	return fmt.Sprintf("Send an email to %s, subject '%s', %s", recipients(out), tools.Shorten(in.Subject, 80), plural(tools.Lines(in.Body), "line"))
}

// summarizeReply is what the person approves for gmail_reply: the
// recipients the reply will have, read from the message it answers as
// the reply reads them.
func (m *mailbox) summarizeReply(ctx context.Context, in replyIn) string {
	to := "its sender"
	if in.ReplyAll {
		to = "everyone on it"
	}
	if svc, err := m.api.Connect(ctx); err == nil {
		if out, _, err := m.replyTo(ctx, svc, in.MessageID, in.ReplyAll, in.Cc); err == nil {
			to = recipients(out)
		}
	}
	return fmt.Sprintf("Reply to message %s, to %s, %s: '%s'", in.MessageID, to, plural(tools.Lines(in.Body), "line"), tools.Shorten(in.Body, 60))
}

// summarizeSendDraft names the draft's recipients and subject as Gmail
// holds them.
func (m *mailbox) summarizeSendDraft(ctx context.Context, in sendDraftIn) string {
	s := "Send the Gmail draft " + in.DraftID
	d, err := google.Do(ctx, m.api, "draft "+in.DraftID, func(svc *gmailapi.Service) (*gmailapi.Draft, error) {
		return svc.Users.Drafts.Get("me", in.DraftID).Format("metadata").Context(ctx).Do()
	})
	if err != nil || d.Message == nil {
		return s + " (its recipients could not be read)"
	}
	h := func(n string) string { return headerOf(d.Message.Payload, n) }
	return fmt.Sprintf("%s to %s, subject '%s'", s, tools.Recipients(addressesOf(h("To")), addressesOf(h("Cc")), addressesOf(h("Bcc"))), tools.Shorten(h("Subject"), 80))
}

// recipients names everyone out goes to.
func recipients(out outgoing) string {
	return tools.Recipients(emails(out.To), emails(out.Cc), emails(out.Bcc))
}

func emails(list []*mail.Address) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.Address
	}
	return out
}

// addressesOf is a header's addresses; the text itself, cut at commas,
// when it does not parse.
func addressesOf(header string) []string {
	if list, err := mail.ParseAddressList(header); err == nil {
		return emails(list)
	}
	var out []string
	for _, a := range strings.Split(header, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sendMessage sends msg through svc, which gmail_reply has built already
// to read the message it answers.
func (m *mailbox) sendMessage(ctx context.Context, svc *gmailapi.Service, msg *gmailapi.Message) (any, error) {
	var sent *gmailapi.Message
	if err := m.api.CallOnce(ctx, "the message", func() (err error) {
		sent, err = svc.Users.Messages.Send("me", msg).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	return sentOf(sent), nil
}

type replyIn struct {
	MessageID string `json:"message_id" desc:"the message to answer"`
	Body      string `json:"body" desc:"plain text of the reply, or Markdown with markdown: true"`
	Markdown  bool   `json:"markdown,omitempty" desc:"also send the body as HTML rendered from its Markdown"`
	ReplyAll  bool   `json:"reply_all,omitempty" desc:"also address the original To and Cc recipients"`
	Cc        string `json:"cc,omitempty" desc:"extra recipients, comma-separated"`
}

// replyTo builds a reply to messageID with threading headers and returns
// it with the thread id.
func (m *mailbox) replyTo(ctx context.Context, svc *gmailapi.Service, messageID string, replyAll bool, extraCc string) (outgoing, string, error) {
	// An approved reply's summary, checked again, and its run read the
	// message once between them.
	orig, err := tools.Once(ctx, "gmail.message "+messageID, func() (orig *gmailapi.Message, err error) {
		err = m.api.Call(ctx, "message "+messageID, func() (err error) {
			orig, err = svc.Users.Messages.Get("me", messageID).Format("metadata").
				MetadataHeaders("From", "To", "Cc", "Reply-To", "Subject", "Message-ID", "References").Context(ctx).Do()
			return err
		})
		return orig, err
	})
	if err != nil {
		return outgoing{}, "", err
	}
	h := func(n string) string { return headerOf(orig.Payload, n) }
	target := h("Reply-To")
	if target == "" {
		target = h("From")
	}
	to, err := parseAddresses("reply_to", target)
	if err != nil || len(to) == 0 {
		return outgoing{}, "", &tools.Error{Code: tools.CodeInvalidArgument, Message: "The original message has no sender address to reply to.",
			Suggestion: "Use gmail_send with an explicit recipient."}
	}
	var cc []*mail.Address
	if replyAll {
		var me *gmailapi.Profile
		if err := m.api.Call(ctx, "the mailbox profile", func() (err error) {
			me, err = svc.Users.GetProfile("me").Context(ctx).Do()
			return err
		}); err != nil {
			return outgoing{}, "", err
		}
		seen := map[string]bool{strings.ToLower(me.EmailAddress): true}
		for _, a := range to {
			seen[strings.ToLower(a.Address)] = true
		}
		for _, field := range []string{"To", "Cc"} {
			list, _ := mail.ParseAddressList(h(field))
			for _, a := range list {
				if !seen[strings.ToLower(a.Address)] {
					seen[strings.ToLower(a.Address)] = true
					cc = append(cc, a)
				}
			}
		}
	}
	more, err := parseAddresses("cc", extraCc)
	if err != nil {
		return outgoing{}, "", err
	}
	msgID := h("Message-ID")
	refs := strings.TrimSpace(h("References") + " " + msgID)
	return outgoing{
		To: to, Cc: append(cc, more...), Subject: replySubject(h("Subject")),
		InReplyTo: msgID, References: refs,
	}, orig.ThreadId, nil
}

func (m *mailbox) reply(ctx context.Context, in replyIn) (any, error) {
	if err := google.Required("message_id", in.MessageID); err != nil {
		return nil, err
	}
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	out, thread, err := m.replyTo(ctx, svc, in.MessageID, in.ReplyAll, in.Cc)
	if err != nil {
		return nil, err
	}
	out.Body, out.Markdown = in.Body, in.Markdown
	if m.mode == SendDraft {
		return insteadOfSending(m.saveDraft(ctx, svc, out, thread))
	}
	return m.sendMessage(ctx, svc, &gmailapi.Message{Raw: out.raw(), ThreadId: thread})
}

type draftIn struct {
	To               string `json:"to,omitempty" desc:"recipients, comma-separated; not needed for a reply"`
	Cc               string `json:"cc,omitempty"`
	Bcc              string `json:"bcc,omitempty"`
	Subject          string `json:"subject,omitempty" desc:"not needed for a reply"`
	Body             string `json:"body" desc:"plain text, or Markdown with markdown: true"`
	Markdown         bool   `json:"markdown,omitempty" desc:"also as HTML rendered from the Markdown"`
	ReplyToMessageID string `json:"reply_to_message_id,omitempty" desc:"make the draft a reply in this message's thread"`
}

type draftOut struct {
	Status    string `json:"status"`
	DraftID   string `json:"draft_id"`
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
	Link      string `json:"link"`
}

func (m *mailbox) createDraft(ctx context.Context, in draftIn) (any, error) {
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var out outgoing
	var thread string
	if in.ReplyToMessageID != "" {
		out, thread, err = m.replyTo(ctx, svc, in.ReplyToMessageID, false, in.Cc)
		if err != nil {
			return nil, err
		}
		if in.To != "" {
			if out.To, err = parseAddresses("to", in.To); err != nil {
				return nil, err
			}
		}
		if in.Subject != "" {
			out.Subject = in.Subject
		}
		if out.Bcc, err = parseAddresses("bcc", in.Bcc); err != nil {
			return nil, err
		}
	} else {
		out, err = sendIn{To: in.To, Cc: in.Cc, Bcc: in.Bcc, Subject: in.Subject}.outgoing()
		if err != nil {
			return nil, err
		}
	}
	out.Body, out.Markdown = in.Body, in.Markdown
	return m.saveDraft(ctx, svc, out, thread)
}

// saveDraft stores out as a draft in thread.
func (m *mailbox) saveDraft(ctx context.Context, svc *gmailapi.Service, out outgoing, thread string) (any, error) {
	var d *gmailapi.Draft
	err := m.api.Call(ctx, "the draft", func() (err error) {
		d, err = svc.Users.Drafts.Create("me", &gmailapi.Draft{Message: &gmailapi.Message{Raw: out.raw(), ThreadId: thread}}).Context(ctx).Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	res := draftOut{Status: "draft saved", DraftID: d.Id}
	if d.Message != nil {
		res.MessageID, res.ThreadID = d.Message.Id, d.Message.ThreadId
	}
	res.Link = "https://mail.google.com/mail/u/0/#drafts?compose=" + res.MessageID
	return res, nil
}

// draftOnly is the status of a send that became a draft.
const draftOnly = "saved as a draft, not sent: sending is turned off here (google.gmail.send: draft); the person sends it from Gmail"

type sendDraftIn struct {
	DraftID string `json:"draft_id" desc:"id from gmail_create_draft"`
}

func (m *mailbox) sendDraft(ctx context.Context, in sendDraftIn) (any, error) {
	if m.mode == SendDraft {
		return nil, &tools.Error{Code: "not_available", Message: "Sending is turned off here (google.gmail.send: draft): the draft stays in Gmail for the person to send.",
			Suggestion: "Tell the person the draft is ready in Gmail."}
	}
	if err := google.Required("draft_id", in.DraftID); err != nil {
		return nil, err
	}
	sent, err := google.DoOnce(ctx, m.api, "draft "+in.DraftID, func(s *gmailapi.Service) (*gmailapi.Message, error) {
		return s.Users.Drafts.Send("me", &gmailapi.Draft{Id: in.DraftID}).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return sentOf(sent), nil
}

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
