package whatsapp

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The patterns are compiled on first use, not at every start of the
// process.
var (
	mdHeading = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`) })
	mdBullet  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[*+]\s+(.*)$`) })
	mdRule    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([-*_])(\s*[-*_]){2,}\s*$`) })
	mdLink    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]\n]+)\]\(([^)\s]+)\)`) })
	mdBoldIt  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*\*([^*\n]+?)\*\*\*`) })
	mdBold    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*([^\n]+?)\*\*`) })
	mdBoldU   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`__([^_\n]+?)__`) })
	mdItalic  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*([^*\s](?:[^*\n]*[^*\s])?)\*`) })
	mdStrike  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`~~([^~\n]+?)~~`) })
	// marks are the bytes the converter marks text with; they are taken
	// out of the input first (they mean nothing to WhatsApp).
	marks = strings.NewReplacer("\x01", "", "\x04", "", "\x05", "")
)

// boldMark stands for a bold asterisk while single asterisks are turned
// into underscores.
const boldMark = "\x01"

// Format converts the Markdown a model writes into WhatsApp's
// formatting: bold becomes *bold*, italic _italic_, strike-through
// ~strike~, headings bold lines, "*" and "+" bullets "- " (WhatsApp's
// own), and links "text (url)". Code blocks become WhatsApp's ```
// monospace blocks without their language tag; inline code, quotes and
// numbered lists are WhatsApp's own already. It never makes a text
// longer.
func Format(md string) string {
	lines := strings.Split(marks.Replace(md), "\n")
	out := make([]string, 0, len(lines))
	inFence := false
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") {
			rest := strings.TrimPrefix(t, "```")
			switch {
			case inFence:
				inFence = false
				out = append(out, "```")
			case len(rest) > 3 && strings.HasSuffix(rest, "```"): // ```code``` on one line
				out = append(out, t)
			default:
				inFence = true
				out = append(out, "```")
			}
			continue
		}
		if inFence {
			out = append(out, line)
			continue
		}
		out = append(out, formatLine(line))
	}
	if inFence {
		out = append(out, "```")
	}
	return strings.Join(out, "\n")
}

func formatLine(line string) string {
	if mdRule().MatchString(line) {
		return "———"
	}
	if m := mdHeading().FindStringSubmatch(line); m != nil {
		text := strings.NewReplacer("**", "", "__", "").Replace(m[1])
		if text == "" {
			return ""
		}
		return "*" + inline(text) + "*"
	}
	if m := mdBullet().FindStringSubmatch(line); m != nil {
		return m[1] + "- " + inline(m[2])
	}
	if rest, ok := strings.CutPrefix(line, "- "); ok {
		return "- " + inline(rest)
	}
	return inline(line)
}

// inline converts one line of prose, leaving `code` spans alone: they
// are set aside behind marks, the line is converted in one pass, and
// they are put back.
func inline(s string) string {
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
		codes = append(codes, s[i:i+2+j])
		s = s[i+2+j:]
	}
	b.WriteString(s)
	out := spans(b.String())
	if len(codes) == 0 {
		return out
	}
	return restore(out, codes)
}

// restore puts back the code spans set aside as \x04 index \x05, in one
// pass.
func restore(s string, values []string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '\x04')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '\x05')
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

// spans converts emphasis and links in text that holds no code.
func spans(s string) string {
	if s == "" {
		return ""
	}
	s = mdLink().ReplaceAllStringFunc(s, func(m string) string {
		p := mdLink().FindStringSubmatch(m)
		text, url := p[1], p[2]
		if text == url || "mailto:"+text == url {
			return url
		}
		return text + " (" + url + ")"
	})
	s = mdBoldIt().ReplaceAllString(s, boldMark+"_${1}_"+boldMark)
	s = mdBold().ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdBoldU().ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdItalic().ReplaceAllString(s, "_${1}_")
	s = mdStrike().ReplaceAllString(s, "~${1}~")
	return strings.ReplaceAll(s, boldMark, "*")
}
