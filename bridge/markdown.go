package bridge

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Markup is how a chat platform writes what Markdown marks, for the
// platforms whose formatting is a lighter Markdown of their own (Slack's
// mrkdwn, WhatsApp's): bold *bold*, italic _italic_, strike-through
// ~strike~, ``` code blocks without a language tag, and headings as bold
// lines are common to them all; the fields say what differs. The zero
// value rewrites no bullets, no quotes and no links, and escapes nothing.
type Markup struct {
	// Rule is what a horizontal rule (---, ***, ___) becomes.
	Rule string
	// Bullet is what a "*" or "+" bullet becomes, its indentation kept;
	// "" leaves those lines as prose.
	Bullet string
	// DashBullets rewrites "-" bullets to Bullet as well; without it they
	// are left as they are.
	DashBullets bool
	// Quotes converts the text of a "> " quote line and writes it back
	// behind "> "; without it a quote line is converted as prose.
	Quotes bool
	// Escape, when set, is applied to all text, code included, before any
	// mark is written.
	Escape func(string) string
	// Link writes a [text](url) link (text and url already escaped); nil
	// leaves links as they are.
	Link func(text, url string) string
	// LinkAside keeps emphasis from being converted inside what Link
	// wrote (a URL's underscores stay underscores).
	LinkAside bool
}

// The patterns are compiled on first use, not at every start of the
// process.
var (
	mdHeading = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`) })
	mdQuote   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)>\s?(.*)$`) })
	mdBullet  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)([-*+])\s+(.*)$`) })
	mdRule    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([-*_])(\s*[-*_]){2,}\s*$`) })
	mdLink    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]\n]+)\]\(([^)\s]+)\)`) })
	mdBoldIt  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*\*([^*\n]+?)\*\*\*`) })
	mdBold    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*([^\n]+?)\*\*`) })
	mdBoldU   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`__([^_\n]+?)__`) })
	mdItalic  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*([^*\s](?:[^*\n]*[^*\s])?)\*`) })
	mdStrike  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`~~([^~\n]+?)~~`) })
	// The converter marks text with bytes \x01 (a bold asterisk), \x02 and
	// \x03 (around a link set aside), \x04 and \x05 (around a code span
	// set aside); they are taken out of the input first (they mean nothing
	// to a chat platform). Links set aside are the only use of \x02 and
	// \x03, so only then are those taken out.
	codeMarks = strings.NewReplacer("\x01", "", "\x04", "", "\x05", "")
	allMarks  = strings.NewReplacer("\x01", "", "\x02", "", "\x03", "", "\x04", "", "\x05", "")
	// unbold drops bold marks from a heading, which is made bold whole.
	unbold = strings.NewReplacer("**", "", "__", "")
)

// boldMark stands for a bold asterisk while single asterisks are turned
// into underscores.
const boldMark = "\x01"

// Convert converts the Markdown a model writes into the platform's
// formatting, line by line. Inside a ``` code block and inside `code`
// spans nothing is converted (only escaped); a block left open is closed
// at the end. Its cost is linear in the length of md.
func (m Markup) Convert(md string) string {
	strip := codeMarks
	if m.LinkAside {
		strip = allMarks
	}
	lines := strings.Split(strip.Replace(md), "\n")
	out := make([]string, 0, len(lines))
	inFence := false
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(t, "```"); ok {
			switch {
			case inFence:
				inFence = false
				out = append(out, "```")
			case len(rest) > 3 && strings.HasSuffix(rest, "```"): // ```code``` on one line
				out = append(out, "```"+m.escape(strings.TrimSuffix(rest, "```"))+"```")
			default:
				inFence = true
				out = append(out, "```")
			}
			continue
		}
		if inFence {
			out = append(out, m.escape(line))
			continue
		}
		out = append(out, m.line(line))
	}
	if inFence {
		out = append(out, "```")
	}
	return strings.Join(out, "\n")
}

// line converts one line outside code blocks.
func (m Markup) line(line string) string {
	if mdRule().MatchString(line) {
		return m.Rule
	}
	if h := mdHeading().FindStringSubmatch(line); h != nil {
		text := unbold.Replace(h[1])
		if text == "" {
			return ""
		}
		return "*" + m.inline(text) + "*"
	}
	if m.Quotes {
		if q := mdQuote().FindStringSubmatch(line); q != nil {
			return q[1] + "> " + m.line(q[2])
		}
	}
	if b := mdBullet().FindStringSubmatch(line); b != nil && m.Bullet != "" && (b[2] != "-" || m.DashBullets) {
		return b[1] + m.Bullet + m.inline(b[3])
	}
	return m.inline(line)
}

// escape applies Escape, if any.
func (m Markup) escape(s string) string {
	if m.Escape == nil {
		return s
	}
	return m.Escape(s)
}

// inline converts one line of prose, leaving `code` spans alone: they
// are set aside behind marks, the line is converted in one pass, and
// they are put back.
func (m Markup) inline(s string) string {
	var b strings.Builder
	var codes []string
	for {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i+1:], '`')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString("\x04" + strconv.Itoa(len(codes)) + "\x05")
		codes = append(codes, "`"+m.escape(s[i+1:i+1+j])+"`")
		s = s[i+2+j:]
	}
	b.WriteString(s)
	out := m.spans(b.String())
	if len(codes) == 0 {
		return out
	}
	return restore(out, '\x04', '\x05', codes)
}

// spans converts emphasis and links in text that holds no code.
func (m Markup) spans(s string) string {
	if s == "" {
		return ""
	}
	s = m.escape(s)
	var links []string
	if m.Link != nil {
		s = mdLink().ReplaceAllStringFunc(s, func(found string) string {
			p := mdLink().FindStringSubmatch(found)
			link := m.Link(p[1], p[2])
			if !m.LinkAside {
				return link
			}
			links = append(links, link)
			return "\x02" + strconv.Itoa(len(links)-1) + "\x03"
		})
	}
	s = mdBoldIt().ReplaceAllString(s, boldMark+"_${1}_"+boldMark)
	s = mdBold().ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdBoldU().ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdItalic().ReplaceAllString(s, "_${1}_")
	s = mdStrike().ReplaceAllString(s, "~${1}~")
	s = strings.ReplaceAll(s, boldMark, "*")
	if len(links) == 0 {
		return s
	}
	return restore(s, '\x02', '\x03', links)
}

// restore puts back the values set aside as open+index+close in s, in one
// pass; a mark that holds no valid index is kept as it is.
func restore(s string, open, close byte, values []string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, open)
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], close)
		n, err := strconv.Atoi(s[i+1 : i+max(j, 1)])
		if j < 0 || err != nil || n < 0 || n >= len(values) {
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(values[n])
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}
