package gmail

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"

	"loadout/tools"
)

// outgoing is a plain-text message to compose.
type outgoing struct {
	To, Cc, Bcc []*mail.Address
	Subject     string
	Body        string
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
	header("Content-Type", `text/plain; charset="UTF-8"`)
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	body := strings.ReplaceAll(strings.ReplaceAll(m.Body, "\r\n", "\n"), "\n", "\r\n")
	qp.Write([]byte(body))
	qp.Close()
	return b.Bytes()
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
