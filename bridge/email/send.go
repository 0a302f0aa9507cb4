package email

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/yuin/goldmark"

	"loadout/bridge"
	"loadout/chat"
)

// Send mails one part of an answer to the route's person, as a reply in
// the thread. A server that fails, or refuses for now (4xx), is tried
// again with growing waits until ctx ends: the part stays in the inbox
// and is sent after a restart. Only a permanent refusal (5xx, other than
// of the credentials) is an error.
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	return a.mail(ctx, r, part, nil)
}

// Ask mails a part that asks the person to approve a call, ending with
// the request's code and how to answer it: a reply whose first line is
// "approve #code" or "deny #code", which counts only from the address
// the question went to, authenticated.
func (a *Adapter) Ask(ctx context.Context, rt any, part string, q bridge.Question, _ string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	return a.mail(ctx, r, part+AskLine(q), nil)
}

// AskLine ends a question: its code and the replies that answer it.
func AskLine(q bridge.Question) string {
	code := chat.CodeOf(q.ID)
	if q.Always != "" {
		return fmt.Sprintf("\n\nRequest %s waits for your answer. Reply to this e-mail with the first line \"approve %s\" to go ahead, \"always %s\" to always allow it, or \"deny %s\" to stop.", code, code, code, code)
	}
	return fmt.Sprintf("\n\nRequest %s waits for your answer. Reply to this e-mail with the first line \"approve %s\" to go ahead, or \"deny %s\" to stop.", code, code, code)
}

// mail sends text (and file, when there is one) to r's person.
func (a *Adapter) mail(ctx context.Context, r route, text string, file *attached) error {
	raw, err := a.compose(r, a.messageID(ctx), text, file)
	if err != nil {
		return err
	}
	return a.patient("sending by SMTP").Do(ctx, smtpRetry, func(ctx context.Context) error {
		return a.submit(ctx, r.To, raw)
	})
}

// messageID is the Message-ID of the part being sent: made from the
// part's key, so a part sent again after a restart carries the same id
// (and a mail client shows it once); random outside an answer.
func (a *Adapter) messageID(ctx context.Context) string {
	_, domain, _ := strings.Cut(a.self, "@")
	var sum []byte
	if key, ok := bridge.PartKey(ctx); ok {
		s := sha256.Sum256([]byte(key))
		sum = s[:16]
	} else {
		sum = make([]byte, 16)
		rand.Read(sum)
	}
	return hex.EncodeToString(sum) + "@" + domain
}

// subject is the Subject of a reply in r's thread.
func (a *Adapter) subject(r route) string {
	if r.Subject == "" {
		return "Message from " + a.cfg.Name
	}
	return "Re: " + r.Subject
}

// compose writes the e-mail: the threading headers, the marks of an
// automatic reply (so that auto-responders do not answer it), the text
// as written (Markdown) and as HTML, and the file.
func (a *Adapter) compose(r route, id, text string, file *attached) ([]byte, error) {
	var h mail.Header
	h.SetDate(time.Now())
	h.SetAddressList("From", []*mail.Address{{Name: a.cfg.Name, Address: a.cfg.Address}})
	h.SetAddressList("To", []*mail.Address{{Address: r.To}})
	h.SetSubject(a.subject(r))
	h.SetMessageID(id)
	if r.InReplyTo != "" {
		h.SetMsgIDList("In-Reply-To", []string{r.InReplyTo})
	}
	if len(r.References) > 0 {
		h.SetMsgIDList("References", r.References)
	}
	h.Set("Auto-Submitted", "auto-replied")
	h.Set("X-Auto-Response-Suppress", "All")
	h.Set("MIME-Version", "1.0")
	if file != nil && text == "" {
		text = file.name
	}
	var buf bytes.Buffer
	w, err := mail.CreateWriter(&buf, h)
	if err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	iw, err := w.CreateInline()
	if err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	for _, p := range []struct{ typ, body string }{{"text/plain", text}, {"text/html", toHTML(text)}} {
		var ph mail.InlineHeader
		ph.SetContentType(p.typ, map[string]string{"charset": "utf-8"})
		pw, err := iw.CreatePart(ph)
		if err != nil {
			return nil, fmt.Errorf("email: compose: %w", err)
		}
		io.WriteString(pw, p.body)
		pw.Close()
	}
	iw.Close()
	if file != nil {
		var ah mail.AttachmentHeader
		ah.SetContentType(file.mimeType, nil)
		ah.SetFilename(file.name)
		aw, err := w.CreateAttachment(ah)
		if err != nil {
			return nil, fmt.Errorf("email: compose: %w", err)
		}
		aw.Write(file.data)
		aw.Close()
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	return buf.Bytes(), nil
}

// toHTML renders Markdown (CommonMark, as Gmail's and Matrix's HTML
// are) as an HTML document. HTML the text itself holds is not passed on
// (goldmark leaves raw HTML out).
func toHTML(text string) string {
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html><body>\n")
	if err := goldmark.Convert([]byte(text), &b); err != nil {
		b.Reset()
		return ""
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// submitTimeout bounds one SMTP conversation.
const submitTimeout = 2 * time.Minute

// submit hands one message to the SMTP server: TLS (from the start, or
// STARTTLS, which must be offered; plain only to a loopback address),
// AUTH, then the envelope and the data.
func (a *Adapter) submit(ctx context.Context, to string, raw []byte) error {
	conn, err := a.dial(ctx, a.smtp)
	if err != nil {
		return err
	}
	conn.SetDeadline(time.Now().Add(submitTimeout))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var c *smtp.Client
	if a.smtp.mode == startTLS {
		if c, err = smtp.NewClientStartTLS(conn, a.tlsConfig(a.smtp)); err != nil {
			conn.Close()
			return fmt.Errorf("email: STARTTLS with %s (email.smtp_url): %w", a.smtp.addr, err)
		}
	} else {
		c = smtp.NewClient(conn)
	}
	defer c.Close()
	if a.cfg.Password != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return fmt.Errorf("email: the SMTP server %s offers no AUTH", a.smtp.addr)
		}
		if err := c.Auth(sasl.NewPlainClient("", a.cfg.Username, a.cfg.Password)); err != nil {
			return fmt.Errorf("email: SMTP AUTH as email.username: %w", err)
		}
	}
	if err := c.Mail(a.self, nil); err != nil {
		return fmt.Errorf("email: MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to, nil); err != nil {
		return fmt.Errorf("email: RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("email: DATA: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return fmt.Errorf("email: DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("email: the SMTP server did not take the message: %w", err)
	}
	c.Quit()
	return nil
}

// smtpRetry classifies an SMTP failure: a refusal for now (4xx), a
// network failure, and a refusal of the credentials (which the operator
// may fix) are tried again; another permanent refusal (5xx: no such
// recipient, a message refused) is final.
func smtpRetry(err error) (bool, time.Duration) {
	var se *smtp.SMTPError
	if errors.As(err, &se) && se.Code >= 500 && se.Code < 600 {
		switch se.Code {
		case 530, 534, 535, 538:
			return true, 0
		}
		return false, 0
	}
	return true, 0
}
