package gmail

import (
	"context"
	"fmt"
	"net/mail"
	"strings"

	gmailapi "google.golang.org/api/gmail/v1"

	"loadout/google"
	"loadout/tools"
)

type sendIn struct {
	To       string `json:"to" desc:"recipients, comma-separated: 'ana@example.com, Bob Ng <bob@example.com>'" reach:"recipients"`
	Cc       string `json:"cc,omitempty" desc:"comma-separated" reach:"recipients"`
	Bcc      string `json:"bcc,omitempty" desc:"comma-separated" reach:"recipients"`
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

// reachReply is whom a reply goes to, read from the message it answers
// as the reply reads it, with the extra cc.
func (m *mailbox) reachReply(ctx context.Context, in replyIn) tools.Reach {
	svc, err := m.api.Connect(ctx)
	if err != nil {
		return tools.UnknownReach("whom the reply goes to could not be read")
	}
	out, _, err := m.replyTo(ctx, svc, in.MessageID, in.ReplyAll, in.Cc)
	if err != nil {
		return tools.UnknownReach("whom the reply goes to could not be read")
	}
	return tools.AddressReach(append(append(emails(out.To), emails(out.Cc)...), emails(out.Bcc)...)...)
}

// draft reads a draft's headers once per call: its summary and its reach
// both name its recipients.
func (m *mailbox) draft(ctx context.Context, id string) (*gmailapi.Draft, error) {
	return tools.Once(ctx, "gmail.draft "+id, func() (*gmailapi.Draft, error) {
		return google.Do(ctx, m.api, "draft "+id, func(svc *gmailapi.Service) (*gmailapi.Draft, error) {
			return svc.Users.Drafts.Get("me", id).Format("metadata").Context(ctx).Do()
		})
	})
}

// summarizeSendDraft names the draft's recipients and subject as Gmail
// holds them.
func (m *mailbox) summarizeSendDraft(ctx context.Context, in sendDraftIn) string {
	s := "Send the Gmail draft " + in.DraftID
	d, err := m.draft(ctx, in.DraftID)
	if err != nil || d.Message == nil {
		return s + " (its recipients could not be read)"
	}
	h := func(n string) string { return headerOf(d.Message.Payload, n) }
	return fmt.Sprintf("%s to %s, subject '%s'", s, tools.Recipients(addressesOf(h("To")), addressesOf(h("Cc")), addressesOf(h("Bcc"))), tools.Shorten(h("Subject"), 80))
}

// reachSendDraft is whom a draft goes to, as Gmail holds it.
func (m *mailbox) reachSendDraft(ctx context.Context, in sendDraftIn) tools.Reach {
	d, err := m.draft(ctx, in.DraftID)
	if err != nil || d.Message == nil {
		return tools.UnknownReach("whom the draft goes to could not be read")
	}
	h := func(n string) string { return headerOf(d.Message.Payload, n) }
	return tools.AddressReach(h("To"), h("Cc"), h("Bcc"))
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
	Cc        string `json:"cc,omitempty" desc:"extra recipients, comma-separated" reach:"recipients"`
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
	To               string `json:"to,omitempty" desc:"recipients, comma-separated; not needed for a reply" reach:"recipients"`
	Cc               string `json:"cc,omitempty" reach:"recipients"`
	Bcc              string `json:"bcc,omitempty" reach:"recipients"`
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
