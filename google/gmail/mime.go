package gmail

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"

	"loadout/tools"

	"github.com/yuin/goldmark"
)

// outgoing is a plain-text message to compose.
type outgoing struct {
	To, Cc, Bcc []*mail.Address
	Subject     string
	Body        string
	// Markdown sends Body as text/plain and, rendered from its Markdown,
	// as text/html: multipart/alternative.
	Markdown bool
	// InReplyTo and References thread a reply (Message-ID values).
	InReplyTo  string
	References string
}

// parseAddresses reads a comma-separated address list such as
// "Ana Lima <ana@example.com>, bob@example.com". field names the argument
// in the error.
func parseAddresses(field, s string) ([]*mail.Address, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	list, err := mail.ParseAddressList(s)
	if err != nil {
		return nil, &tools.Error{
			Code:       tools.CodeInvalidArgument,
			Message:    fmt.Sprintf("%s: could not read %q as email addresses (%v).", field, s, err),
			Suggestion: `Give addresses like "ana@example.com" or "Ana Lima <ana@example.com>", separated by commas.`,
		}
	}
	return list, nil
}

// raw renders m as an RFC 5322 message in Gmail's base64url "raw" form.
// Names and the subject are RFC 2047 encoded when they are not ASCII; the
// body is UTF-8, quoted-printable.
func (m outgoing) raw() string {
	return base64.URLEncoding.EncodeToString(m.bytes())
}

func (m outgoing) bytes() []byte {
	var b bytes.Buffer
	header := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	header("To", joinAddresses(m.To))
	header("Cc", joinAddresses(m.Cc))
	header("Bcc", joinAddresses(m.Bcc))
	header("Subject", mime.QEncoding.Encode("utf-8", oneLine(m.Subject)))
	header("In-Reply-To", oneLine(m.InReplyTo))
	header("References", oneLine(m.References))
	header("MIME-Version", "1.0")
	if !m.Markdown {
		writePart(&b, "text/plain", m.Body)
		return b.Bytes()
	}
	var html bytes.Buffer
	html.WriteString("<!doctype html><html><body>")
	if err := goldmark.Convert([]byte(m.Body), &html); err != nil {
		// A body goldmark cannot render goes as plain text only.
		writePart(&b, "text/plain", m.Body)
		return b.Bytes()
	}
	html.WriteString("</body></html>")
	w := multipart.NewWriter(&b)
	header("Content-Type", `multipart/alternative; boundary="`+w.Boundary()+`"`)
	b.WriteString("\r\n")
	for _, p := range []struct{ typ, body string }{{"text/plain", m.Body}, {"text/html", html.String()}} {
		pw, _ := w.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {p.typ + `; charset="UTF-8"`},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		writeBody(pw, p.body)
	}
	w.Close()
	return b.Bytes()
}

// writePart writes the content headers of a single-part body and the body.
func writePart(b *bytes.Buffer, typ, body string) {
	fmt.Fprintf(b, "Content-Type: %s; charset=\"UTF-8\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n", typ)
	writeBody(b, body)
}

// writeBody writes body quoted-printable with CRLF line ends.
func writeBody(w io.Writer, body string) {
	qp := quotedprintable.NewWriter(w)
	qp.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n")))
	qp.Close()
}

func joinAddresses(list []*mail.Address) string {
	s := make([]string, len(list))
	for i, a := range list {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// oneLine removes line breaks so a value cannot add headers.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.NewReplacer("\r", " ", "\n", " ").Replace(s)), " ")
}

// replySubject prefixes "Re: " unless the subject already has it.
func replySubject(s string) string {
	if len(s) >= 3 && strings.EqualFold(s[:3], "re:") {
		return s
	}
	return "Re: " + s
}
