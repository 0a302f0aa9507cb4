package slack

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	mdHeading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	mdQuote   = regexp.MustCompile(`^(\s*)>\s?(.*)$`)
	mdBullet  = regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`)
	mdRule    = regexp.MustCompile(`^\s*([-*_])(\s*[-*_]){2,}\s*$`)
	mdLink    = regexp.MustCompile(`\[([^\]\n]+)\]\(([^)\s]+)\)`)
	mdBoldIt  = regexp.MustCompile(`\*\*\*([^*\n]+?)\*\*\*`)
	mdBold    = regexp.MustCompile(`\*\*([^\n]+?)\*\*`)
	mdBoldU   = regexp.MustCompile(`__([^_\n]+?)__`)
	mdItalic  = regexp.MustCompile(`\*([^*\s](?:[^*\n]*[^*\s])?)\*`)
	mdStrike  = regexp.MustCompile(`~~([^~\n]+?)~~`)
	mdHolder  = regexp.MustCompile("\x02([0-9]+)\x03")

	slackRef = regexp.MustCompile(`<([^<>|]+)(?:\|([^<>]*))?>`)
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
	lines := strings.Split(md, "\n")
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
	if mdRule.MatchString(line) {
		return "──────────"
	}
	if m := mdHeading.FindStringSubmatch(line); m != nil {
		text := strings.NewReplacer("**", "", "__", "").Replace(m[1])
		if text == "" {
			return ""
		}
		return "*" + inline(text) + "*"
	}
	if m := mdQuote.FindStringSubmatch(line); m != nil {
		return m[1] + ">" + " " + mrkdwnLine(m[2])
	}
	if m := mdBullet.FindStringSubmatch(line); m != nil {
		return m[1] + "• " + inline(m[2])
	}
	return inline(line)
}

// inline converts one line of prose, leaving `code` spans alone.
func inline(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "`")
		if i < 0 {
			break
		}
		j := strings.Index(s[i+1:], "`")
		if j < 0 {
			break
		}
		b.WriteString(spans(s[:i]))
		b.WriteString("`" + escape(s[i+1:i+1+j]) + "`")
		s = s[i+2+j:]
	}
	b.WriteString(spans(s))
	return b.String()
}

// spans converts emphasis and links in text that holds no code.
func spans(s string) string {
	if s == "" {
		return ""
	}
	s = escape(s)
	var links []string
	s = mdLink.ReplaceAllStringFunc(s, func(m string) string {
		p := mdLink.FindStringSubmatch(m)
		links = append(links, "<"+p[2]+"|"+strings.ReplaceAll(p[1], "|", "¦")+">")
		return "\x02" + strconv.Itoa(len(links)-1) + "\x03"
	})
	s = mdBoldIt.ReplaceAllString(s, boldMark+"_${1}_"+boldMark)
	s = mdBold.ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdBoldU.ReplaceAllString(s, boldMark+"${1}"+boldMark)
	s = mdItalic.ReplaceAllString(s, "_${1}_")
	s = mdStrike.ReplaceAllString(s, "~${1}~")
	s = strings.ReplaceAll(s, boldMark, "*")
	return mdHolder.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(mdHolder.FindStringSubmatch(m)[1])
		return links[n]
	})
}

// escape replaces the three characters Slack treats as control characters.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// PlainText turns the text of a Slack message into what a person typed:
// the bot's own mention (botUserID) is removed, other mentions, channels
// and links become readable text, and entities are unescaped.
func PlainText(text, botUserID string) string {
	text = slackRef.ReplaceAllStringFunc(text, func(m string) string {
		p := slackRef.FindStringSubmatch(m)
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
