package gmail

import (
	"encoding/base64"
	"regexp"
	"strings"
	"sync"

	xhtml "golang.org/x/net/html"
	gmailapi "google.golang.org/api/gmail/v1"
)

// attachment is a file attached to a message.
type attachment struct {
	Filename     string `json:"filename"`
	MimeType     string `json:"mime_type"`
	Size         int64  `json:"size"`
	AttachmentID string `json:"attachment_id,omitempty"`
}

// parts collects the text bodies and attachments of a message payload.
type parts struct {
	plain, html []string
	attachments []attachment
}

func (ps *parts) walk(p *gmailapi.MessagePart) {
	if p == nil {
		return
	}
	if p.Filename != "" {
		a := attachment{Filename: p.Filename, MimeType: p.MimeType}
		if p.Body != nil {
			a.Size, a.AttachmentID = p.Body.Size, p.Body.AttachmentId
		}
		ps.attachments = append(ps.attachments, a)
		return
	}
	mt := strings.ToLower(p.MimeType)
	switch {
	case strings.HasPrefix(mt, "multipart/"):
		for _, c := range p.Parts {
			ps.walk(c)
		}
	case mt == "text/plain" && p.Body != nil:
		ps.plain = append(ps.plain, decodeData(p.Body.Data))
	case mt == "text/html" && p.Body != nil:
		ps.html = append(ps.html, decodeData(p.Body.Data))
	}
}

// text returns the message's readable text: the plain part when there is
// one, else the HTML part turned into text.
func (ps *parts) text() string {
	if t := strings.TrimSpace(strings.Join(ps.plain, "\n\n")); t != "" {
		return normalize(t)
	}
	var b strings.Builder
	for _, h := range ps.html {
		b.WriteString(htmlToText(h))
		b.WriteString("\n\n")
	}
	return normalize(b.String())
}

// decodeBytes decodes Gmail's base64url data (padded or not): bodies and
// attachments.
func decodeBytes(s string) ([]byte, error) {
	b, err := base64.URLEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	return b, err
}

// decodeData decodes body data as text; "" when it is not base64url.
func decodeData(s string) string {
	b, err := decodeBytes(s)
	if err != nil {
		return ""
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// The patterns are compiled on first use, not at every start of the
// process.
var (
	spaces    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[ \t\f\v\x{00a0}]+`) })
	manyBlank = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\n{3,}`) })
)

// normalize trims every line, collapses runs of spaces and blank lines.
func normalize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(spaces().ReplaceAllString(l, " "))
	}
	return strings.TrimSpace(manyBlank().ReplaceAllString(strings.Join(lines, "\n"), "\n\n"))
}

var blocks = map[string]bool{
	"p": true, "div": true, "tr": true, "table": true, "ul": true, "ol": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "blockquote": true, "pre": true, "section": true,
	"article": true, "header": true, "footer": true, "hr": true,
}

// htmlToText turns an HTML mail body into readable text: scripts, styles
// and the head are dropped, blocks and <br> become line breaks, list items
// get a dash, and a link's address follows its text when they differ.
func htmlToText(src string) string {
	z := xhtml.NewTokenizer(strings.NewReader(src))
	var (
		b         strings.Builder
		skip      int
		href      string
		linkStart int
	)
	for {
		tt := z.Next()
		switch tt {
		case xhtml.ErrorToken:
			return b.String()
		case xhtml.TextToken:
			if skip == 0 {
				writeText(&b, string(z.Text()))
			}
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken, xhtml.EndTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			end := tt == xhtml.EndTagToken
			switch tag {
			case "script", "style", "head", "title", "noscript":
				if tt == xhtml.StartTagToken {
					skip++
				} else if end && skip > 0 {
					skip--
				}
				continue
			}
			if skip > 0 {
				continue
			}
			switch {
			case tag == "br":
				b.WriteString("\n")
			case tag == "li" && !end:
				b.WriteString("\n- ")
			case (tag == "td" || tag == "th") && end:
				b.WriteString(" ")
			case tag == "a" && !end:
				href = ""
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					if string(k) == "href" {
						href = string(v)
					}
				}
				linkStart = b.Len()
			case tag == "a" && end:
				text := b.String()[linkStart:]
				if (strings.HasPrefix(href, "http://") || strings.HasPrefix(href, "https://")) && !strings.Contains(text, href) {
					b.WriteString(" (" + href + ")")
				}
				href = ""
			case blocks[tag]:
				b.WriteString("\n")
			}
		}
	}
}

// writeText appends HTML text with its whitespace collapsed to single
// spaces, as a browser shows it.
func writeText(b *strings.Builder, t string) {
	f := strings.Fields(t)
	if len(f) == 0 {
		if t != "" {
			b.WriteByte(' ')
		}
		return
	}
	if t[0] == ' ' || t[0] == '\n' || t[0] == '\t' || t[0] == '\r' {
		b.WriteByte(' ')
	}
	b.WriteString(strings.Join(f, " "))
	if l := t[len(t)-1]; l == ' ' || l == '\n' || l == '\t' || l == '\r' {
		b.WriteByte(' ')
	}
}
