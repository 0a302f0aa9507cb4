package email

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strings"
	"sync"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // messages in other charsets than UTF-8 and ASCII
	"github.com/emersion/go-message/mail"
	"golang.org/x/net/html"
)

// letter is a message as the channel reads it.
type letter struct {
	header mail.Header
	// id is the Message-ID, without angle brackets; "" when it has none.
	id   string
	from string // the one From address, lower-cased
	// subject is the Subject without Re:/Fwd: before it.
	subject    string
	references []string
	inReplyTo  []string
	// body is the text the person wrote: the plain part (or the HTML
	// part's text), without the quoted message and the signature.
	body  string
	files []attached
}

// attached is a file that came with a message.
type attached struct {
	name, mimeType string
	data           []byte
}

// errBroken: the message cannot be read as MIME.
var errBroken = errors.New("the message is not readable MIME")

// readHeader reads a message's header and its one From address.
func readHeader(raw []byte) (*letter, *mail.Reader, error) {
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, nil, fmt.Errorf("%w: %w", errBroken, err)
	}
	if mr == nil {
		return nil, nil, errBroken
	}
	l := &letter{header: mr.Header}
	froms, err := mr.Header.AddressList("From")
	if err != nil || len(froms) != 1 {
		return nil, nil, fmt.Errorf("%w: a message needs exactly one From address (%d, %v)", errBroken, len(froms), err)
	}
	if l.from, err = addressOf(froms[0].Address); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errBroken, err)
	}
	l.id, _ = mr.Header.MessageID()
	l.references, _ = mr.Header.MsgIDList("References")
	l.inReplyTo, _ = mr.Header.MsgIDList("In-Reply-To")
	subject, _ := mr.Header.Subject()
	l.subject = bareSubject(subject)
	return l, mr, nil
}

// readBody reads the parts of a message whose header readHeader read.
func readBody(l *letter, mr *mail.Reader) error {
	var plain, htm string
	havePlain, haveHTML := false, false
	for n := 1; ; n++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
			return fmt.Errorf("%w: part %d: %w", errBroken, n, err)
		}
		if p == nil {
			return fmt.Errorf("%w: part %d", errBroken, n)
		}
		data, err := io.ReadAll(p.Body)
		if err != nil {
			return fmt.Errorf("%w: part %d: %w", errBroken, n, err)
		}
		var name, mimeType string
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			mimeType, _, _ = h.ContentType()
			switch {
			case mimeType == "text/plain" || mimeType == "":
				if !havePlain {
					plain, havePlain = string(data), true
				}
				continue
			case mimeType == "text/html":
				if !haveHTML {
					htm, haveHTML = string(data), true
				}
				continue
			}
			_, params, _ := h.ContentDisposition()
			name = params["filename"]
		case *mail.AttachmentHeader:
			mimeType, _, _ = h.ContentType()
			name, _ = h.Filename()
		}
		if mimeType == "" {
			mimeType = "application/octet-stream"
		}
		if name == "" {
			name = fmt.Sprintf("attachment-%d", n)
			if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
				name += exts[0]
			}
		}
		l.files = append(l.files, attached{name: name, mimeType: mimeType, data: data})
	}
	text := plain
	if !havePlain && haveHTML {
		text = htmlText(htm)
	}
	l.body = withoutQuote(text)
	return nil
}

// parse reads a whole message.
func parse(raw []byte) (*letter, error) {
	l, mr, err := readHeader(raw)
	if err != nil {
		return nil, err
	}
	defer mr.Close()
	if err := readBody(l, mr); err != nil {
		return nil, err
	}
	return l, nil
}

// root is the id of the thread's first message: the first of
// References, else In-Reply-To, else the message's own id.
func (l *letter) root() string {
	if len(l.references) > 0 {
		return l.references[0]
	}
	if len(l.inReplyTo) > 0 {
		return l.inReplyTo[0]
	}
	return l.id
}

// starts reports whether the message starts a thread.
func (l *letter) starts() bool { return len(l.references) == 0 && len(l.inReplyTo) == 0 }

// maxRefs is how many ids a reply's References keep: the thread's
// first and the latest.
const maxRefs = 20

// replyRefs are the References of a reply to l.
func (l *letter) replyRefs() []string {
	refs := append(append([]string(nil), l.references...), l.id)
	if len(l.references) == 0 && len(l.inReplyTo) > 0 {
		refs = append(append([]string(nil), l.inReplyTo...), l.id)
	}
	if l.id == "" {
		refs = refs[:len(refs)-1]
	}
	if len(refs) > maxRefs {
		refs = append(refs[:1:1], refs[len(refs)-maxRefs+1:]...)
	}
	return refs
}

var (
	// replyPrefix is one "Re:", "Fwd:" and the like before a subject.
	replyPrefix = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)^\s*(re|fw|fwd|aw|sv|vs|antw)\s*(\[\d+\])?\s*:\s*`)
	})
	// decision is a reply that answers a question: "approve #k7f2",
	// "deny k7f2", "always #k7f2", with or without a slash.
	decision = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)^/?(approve|deny|always)\s+#?([a-z0-9]{2,32})\s*[.!]?\s*$`)
	})
)

// bareSubject is subject without the Re: and Fwd: before it.
func bareSubject(s string) string {
	for i := 0; i < 10; i++ {
		loc := replyPrefix().FindStringIndex(s)
		if loc == nil {
			break
		}
		s = s[loc[1]:]
	}
	return strings.TrimSpace(s)
}

// text is what the person said, as the router reads it: "/clear" when
// the subject or the first line is that; "/approve #code" or
// "/deny #code" when the first line answers a question; otherwise the
// body, after the subject when the message starts a thread.
func (l *letter) text() string {
	first, _, _ := strings.Cut(l.body, "\n")
	first = strings.TrimSpace(first)
	if strings.EqualFold(l.subject, "/clear") || strings.EqualFold(first, "/clear") {
		return "/clear"
	}
	if m := decision().FindStringSubmatch(first); m != nil {
		return "/" + strings.ToLower(m[1]) + " #" + strings.ToLower(m[2])
	}
	if l.starts() && l.subject != "" && !strings.HasPrefix(l.body, "/") {
		return strings.TrimSpace(l.subject + "\n\n" + l.body)
	}
	return l.body
}

// withoutQuote is a reply's text without the message it quotes (lines
// starting with ">", and the "On … wrote:" line before them) and
// without the signature (after "-- ").
func withoutQuote(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	// quotedNext[i]: the next non-blank line after i is quoted.
	quotedNext := make([]bool, len(lines)+1)
	for i := len(lines) - 2; i >= 0; i-- {
		next := strings.TrimSpace(lines[i+1])
		quotedNext[i] = strings.HasPrefix(next, ">") || (next == "" && quotedNext[i+1])
	}
	var out []string
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if line == "-- " || line == "--" {
			break
		}
		if strings.HasPrefix(t, ">") {
			continue
		}
		if strings.HasSuffix(t, "wrote:") && quotedNext[i] {
			continue
		}
		out = append(out, strings.TrimRight(line, " \t"))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// htmlText is the text of an HTML body: its words, with a line break
// after each block, without scripts and styles.
func htmlText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.TrimSpace(b.String())
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "head":
				skip++
			case "br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote":
				b.WriteByte('\n')
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "head":
				if skip > 0 {
					skip--
				}
			case "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6":
				b.WriteByte('\n')
			}
		}
	}
}
