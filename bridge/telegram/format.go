package telegram

import (
	"html"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// HTML converts the model's Markdown into Telegram's HTML parse mode:
// **bold**, *italic* and _italic_, ~~strike~~, `code`, fenced code blocks
// (with their language), [links](https://…), headings (shown bold) and
// bullet lists (shown with •). Everything else is escaped, so the result
// is always well-formed: every tag opened is closed in the same line or
// block. Text that is not Markdown comes out as the same text, escaped.
func HTML(md string) string {
	var out []string
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			lang := fenceLang(strings.TrimPrefix(trimmed, "```"))
			var code []string
			j := i + 1
			for ; j < len(lines); j++ {
				if strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
					break
				}
				code = append(code, lines[j])
			}
			i = j
			open := "<pre>"
			if lang != "" {
				open = `<pre><code class="language-` + lang + `">`
			}
			closeTag := "</pre>"
			if lang != "" {
				closeTag = "</code></pre>"
			}
			out = append(out, open+html.EscapeString(strings.Join(code, "\n"))+closeTag)
			continue
		}
		out = append(out, blockLine(line))
	}
	return strings.Join(out, "\n")
}

var (
	headingRe = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	bulletRe  = regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`)
	langRe    = regexp.MustCompile(`^[A-Za-z0-9_+#.-]{1,32}$`)
)

func fenceLang(s string) string {
	s = strings.TrimSpace(s)
	if langRe.MatchString(s) {
		return s
	}
	return ""
}

// blockLine renders one line outside code blocks.
func blockLine(line string) string {
	if m := headingRe.FindStringSubmatch(line); m != nil {
		return "<b>" + inline(m[1]) + "</b>"
	}
	if m := bulletRe.FindStringSubmatch(line); m != nil && !isRule(line) {
		return m[1] + "• " + inline(m[2])
	}
	return inline(line)
}

// isRule reports whether line is a thematic break like "---" or "* * *".
func isRule(line string) bool {
	s := strings.ReplaceAll(strings.TrimSpace(line), " ", "")
	return len(s) >= 3 && (strings.Trim(s, "-") == "" || strings.Trim(s, "*") == "" || strings.Trim(s, "_") == "")
}

// inline renders emphasis, code spans and links within one line.
func inline(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_{}[]()#+-.!~|>", s[i+1]) >= 0:
			b.WriteString(html.EscapeString(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := run(s, i, '`')
			if j := strings.Index(s[i+n:], s[i:i+n]); j >= 0 {
				code := s[i+n : i+n+j]
				if strings.TrimSpace(code) != "" {
					b.WriteString("<code>" + html.EscapeString(strings.TrimSpace(code)) + "</code>")
					i += n + j + n
					continue
				}
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case c == '[':
			if text, url, n, ok := link(s[i:]); ok {
				b.WriteString(`<a href="` + html.EscapeString(url) + `">` + inline(text) + "</a>")
				i += n
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if tag, inner, n, ok := emphasis(s, i); ok {
				b.WriteString("<" + tag + ">" + inline(inner) + "</" + tag + ">")
				i += n
				continue
			}
			n := run(s, i, c)
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(html.EscapeString(s[i : i+size]))
		i += size
	}
	return b.String()
}

// run returns the length of the run of c starting at i.
func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// emphasis recognises a delimited span starting at s[i]: ** or __ (bold),
// * or _ (italic), ~~ (strike). It returns the tag, the inner text and the
// span's length.
func emphasis(s string, i int) (tag, inner string, n int, ok bool) {
	c := s[i]
	width := run(s, i, c)
	var delim string
	switch {
	case c == '~' && width == 2:
		delim, tag = "~~", "s"
	case c != '~' && width == 2:
		delim, tag = s[i:i+2], "b"
	case c != '~' && width == 1:
		delim, tag = s[i:i+1], "i"
	default:
		return "", "", 0, false
	}
	start := i + len(delim)
	if start >= len(s) || s[start] == ' ' {
		return "", "", 0, false
	}
	// An underscore inside a word (snake_case) is not emphasis.
	if c == '_' && i > 0 && isWordByte(s[i-1]) {
		return "", "", 0, false
	}
	for j := start + 1; j+len(delim) <= len(s); j++ {
		if s[j:j+len(delim)] != delim || s[j-1] == ' ' {
			continue
		}
		// The closer must be a run of exactly this width.
		if run(s, j, c) != len(delim) || s[j-1] == c {
			continue
		}
		end := j + len(delim)
		if c == '_' && end < len(s) && isWordByte(s[end]) {
			continue
		}
		return tag, s[start:j], end - i, true
	}
	return "", "", 0, false
}

func isWordByte(b byte) bool {
	r := rune(b)
	return b >= utf8.RuneSelf || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// link parses "[text](url)" at the start of s. Only web, mail and tg links
// become links; anything else stays text.
func link(s string) (text, url string, n int, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				if i+1 >= len(s) || s[i+1] != '(' {
					return "", "", 0, false
				}
				end := strings.IndexByte(s[i+2:], ')')
				if end < 0 {
					return "", "", 0, false
				}
				url = strings.TrimSpace(s[i+2 : i+2+end])
				lower := strings.ToLower(url)
				if strings.ContainsAny(url, " \t") || !(strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") ||
					strings.HasPrefix(lower, "mailto:") || strings.HasPrefix(lower, "tg://")) {
					return "", "", 0, false
				}
				text = s[1:i]
				if strings.TrimSpace(text) == "" {
					return "", "", 0, false
				}
				return text, url, i + 2 + end + 1, true
			}
		}
	}
	return "", "", 0, false
}
