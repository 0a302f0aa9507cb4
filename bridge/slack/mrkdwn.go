package slack

import (
	"regexp"
	"strings"
	"sync"

	"loadout/bridge"
)

// slackRef is compiled on first use, not at every start of the process.
var slackRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<([^<>|]+)(?:\|([^<>]*))?>`) })

// Mrkdwn converts the Markdown a model writes into Slack's mrkdwn: bold
// becomes *bold*, italic _italic_, strike-through ~strike~, links
// <url|text>, headings bold lines and bullets "•". Code blocks and inline
// code are kept verbatim (a code block's language tag is dropped, since
// Slack shows it as text). &, < and > are escaped as Slack requires.
func Mrkdwn(md string) string {
	return bridge.Markup{
		Rule:        "──────────",
		Bullet:      "• ",
		DashBullets: true,
		Quotes:      true,
		Escape:      escape,
		Link: func(text, url string) string {
			return "<" + url + "|" + strings.ReplaceAll(text, "|", "¦") + ">"
		},
		LinkAside: true,
	}.Convert(md)
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
