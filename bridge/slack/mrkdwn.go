package slack

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
	mdQuote   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)>\s?(.*)$`) })
	mdBullet  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`) })
	mdRule    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([-*_])(\s*[-*_]){2,}\s*$`) })
	mdLink    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]\n]+)\]\(([^)\s]+)\)`) })
	mdBoldIt  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*\*([^*\n]+?)\*\*\*`) })
	mdBold    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*([^\n]+?)\*\*`) })
	mdBoldU   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`__([^_\n]+?)__`) })
	mdItalic  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*([^*\s](?:[^*\n]*[^*\s])?)\*`) })
	mdStrike  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`~~([^~\n]+?)~~`) })
	// placeholderBytes are the bytes the converter marks text with; they
	// are taken out of the input first (they mean nothing to Slack).
	placeholderBytes = strings.NewReplacer("\x01", "", "\x02", "", "\x03", "", "\x04", "", "\x05", "")

	slackRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<([^<>|]+)(?:\|([^<>]*))?>`) })
)

// boldMark stands for a bold asterisk while single asterisks are turned
// into underscores.
const boldMark = "\x01"

// Mrkdwn converts the Markdown a model writes into Slack's mrkdwn: bold
// becomes *bold*, italic _italic_, strike-through ~strike~, links
// <url|text>, headings bold lines and bullets "•". Code blocks and inline
// code are kept verbatim (a code block's language tag is dropped, since
// Slack shows it as text). &, < and > are escaped as Slack requires.
func Mrkdwn(md string) string {
	lines := strings.Split(placeholderBytes.Replace(md), "\n")
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
				out = append(out, "```"+escape(strings.TrimSuffix(rest, "```"))+"```")
			default:
				inFence = true
				out = append(out, "```")
			}
			continue
		}
		if inFence {
			out = append(out, escape(line))
			continue
		}
		out = append(out, mrkdwnLine(line))
	}
	if inFence {
		out = append(out, "```")
	}
	return strings.Join(out, "\n")
}

func mrkdwnLine(line string) string {
	if mdRule().MatchString(line) {
		return "──────────"
	}
	if m := mdHeading().FindStringSubmatch(line); m != nil {
		text := strings.NewReplacer("**", "", "__", "").Replace(m[1])
		if text == "" {
			return ""
		}
		return "*" + inline(text) + "*"
	}
	if m := mdQuote().FindStringSubmatch(line); m != nil {
		return m[1] + ">" + " " + mrkdwnLine(m[2])
	}
	if m := mdBullet().FindStringSubmatch(line); m != nil {
		return m[1] + "• " + inline(m[2])
	}
	return inline(line)
}

// inline converts one line of prose, leaving `code` spans alone: they
// are set aside behind placeholders, the line is converted in one pass,
// and they are put back.
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
		codes = append(codes, "`"+escape(s[i+1:i+1+j])+"`")
		s = s[i+2+j:]
	}
	b.WriteString(s)
	out := spans(b.String())
	if len(codes) == 0 {
		return out
	}
	return restore(out, '\x04', '\x05', codes)
}

// restore puts back the values set aside as open+index+close in s, in one
// pass.
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

// spans converts emphasis and links in text that holds no code.
func spans(s string) string {
	if s == "" {
		return ""
	}
	s = escape(s)
	var links []string
	s = mdLink().ReplaceAllStringFunc(s, func(m string) string {
		p := mdLink().FindStringSubmatch(m)
		links = append(links, "<"+p[2]+"|"+strings.ReplaceAll(p[1], "|", "¦")+">")
		return "\x02" + strconv.Itoa(len(links)-1) + "\x03"
	})
	s = mdBoldIt().ReplaceAllString(s, boldMark+"_${1}_"+boldMark)
	s = mdBold().ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdBoldU().ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdItalic().ReplaceAllString(s, "_${1}_")
	s = mdStrike().ReplaceAllString(s, "~${1}~")
	s = strings.ReplaceAll(s, boldMark, "*")
	return restore(s, '\x02', '\x03', links)
}

// escape replaces the three characters Slack treats as control characters.
func escape(s string) string { return escaper.Replace(s) }

// escaper is built once: building one costs more than most texts it
// escapes. A Replacer is safe for concurrent use.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// PlainText turns the text of a Slack message into what a person typed:
// the bot's own mention (botUserID) is removed, other mentions, channels
// and links become readable text, and entities are unescaped.
func PlainText(text, botUserID string) string {
	text = slackRef().ReplaceAllStringFunc(text, func(m string) string {
		p := slackRef().FindStringSubmatch(m)
		target, label := p[1], p[2]
		switch {
		case strings.HasPrefix(target, "@"):
			if botUserID != "" && target == "@"+botUserID {
				return ""
			}
			if label != "" {
				return "@" + label
			}
			return target
		case strings.HasPrefix(target, "#"):
			if label != "" {
				return "#" + label
			}
			return target
		case strings.HasPrefix(target, "!"):
			name, _, _ := strings.Cut(strings.TrimPrefix(target, "!"), "^")
			if label != "" {
				return label
			}
			return "@" + name
		case label != "" && label != target && "mailto:"+label != target && !strings.HasSuffix(target, "//"+label):
			return label + " (" + target + ")"
		case strings.HasPrefix(target, "mailto:"):
			return strings.TrimPrefix(target, "mailto:")
		}
		return target
	})
	text = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(text)
	return strings.TrimSpace(text)
}
