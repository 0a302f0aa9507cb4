package telegram

import (
	"html"
	"regexp"
	"sort"
	"strings"
	"sync"
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

// The patterns are compiled on first use, not at every start of the
// process.
var (
	headingRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`) })
	bulletRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`) })
	langRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_+#.-]{1,32}$`) })
)

func fenceLang(s string) string {
	s = strings.TrimSpace(s)
	if langRe().MatchString(s) {
		return s
	}
	return ""
}

// blockLine renders one line outside code blocks.
func blockLine(line string) string {
	if m := headingRe().FindStringSubmatch(line); m != nil {
		return "<b>" + inline(m[1]) + "</b>"
	}
	if m := bulletRe().FindStringSubmatch(line); m != nil && !isRule(line) {
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
func inline(s string) string { return inlineAt(s, 0) }

// maxNesting bounds how deep emphasis and links nest; deeper text is shown
// as it is. With it, and the closers looked up instead of searched for,
// a line costs O(n log n) whatever it holds.
const maxNesting = 4

func inlineAt(s string, depth int) string {
	if depth >= maxNesting {
		return html.EscapeString(s)
	}
	x := newMarks(s)
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
			if j := x.after(x.runs['`'][n], i+n); j >= 0 {
				code := s[i+n : j]
				if strings.TrimSpace(code) != "" {
					b.WriteString("<code>" + html.EscapeString(strings.TrimSpace(code)) + "</code>")
					i = j + n
					continue
				}
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case c == '[':
			if text, url, n, ok := x.link(i); ok {
				b.WriteString(`<a href="` + html.EscapeString(url) + `">` + inlineAt(text, depth+1) + "</a>")
				i += n
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if tag, inner, n, ok := x.emphasis(i); ok {
				b.WriteString("<" + tag + ">" + inlineAt(inner, depth+1) + "</" + tag + ">")
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

// marks indexes one line's delimiters in a single pass, so finding a
// closer is a lookup, not a scan to the end of the line.
type marks struct {
	s string
	// runs[c][w] are the starts of the maximal runs of exactly w of the
	// byte c, ascending. For '*', '_' and '~' only runs that can close
	// emphasis are kept.
	runs map[byte]map[int][]int
	// match[i] is the ']' matching the '[' at i.
	match map[int]int
	// parens are the positions of ')', ascending.
	parens []int
}

func newMarks(s string) *marks {
	x := &marks{s: s, runs: map[byte]map[int][]int{'`': {}, '*': {}, '_': {}, '~': {}}, match: map[int]int{}}
	var open []int
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '`', '*', '_', '~':
			n := run(s, i, c)
			// An emphasis closer follows a non-space, and an underscore
			// closer does not run into a word.
			closer := i > 0 && s[i-1] != ' ' && !(c == '_' && i+n < len(s) && isWordByte(s[i+n]))
			if c == '`' || closer {
				x.runs[c][n] = append(x.runs[c][n], i)
			}
			i += n
			continue
		case '[':
			open = append(open, i)
		case ']':
			if len(open) > 0 {
				x.match[open[len(open)-1]] = i
				open = open[:len(open)-1]
			}
		case ')':
			x.parens = append(x.parens, i)
		}
		i++
	}
	return x
}

// after returns the first position in the ascending list at or after
// from, or -1.
func (x *marks) after(list []int, from int) int {
	k := sort.SearchInts(list, from)
	if k == len(list) {
		return -1
	}
	return list[k]
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
func (x *marks) emphasis(i int) (tag, inner string, n int, ok bool) {
	s := x.s
	c := s[i]
	width := run(s, i, c)
	switch {
	case c == '~' && width == 2:
		tag = "s"
	case c != '~' && width == 2:
		tag = "b"
	case c != '~' && width == 1:
		tag = "i"
	default:
		return "", "", 0, false
	}
	start := i + width
	if start >= len(s) || s[start] == ' ' {
		return "", "", 0, false
	}
	// An underscore inside a word (snake_case) is not emphasis.
	if c == '_' && i > 0 && isWordByte(s[i-1]) {
		return "", "", 0, false
	}
	j := x.after(x.runs[c][width], start+1)
	if j < 0 {
		return "", "", 0, false
	}
	return tag, s[start:j], j + width - i, true
}

// link parses "[text](url)" at s[i]. Only web, mail and tg links become
// links; anything else stays text.
func (x *marks) link(i int) (text, url string, n int, ok bool) {
	s := x.s
	j, found := x.match[i]
	if !found || j+1 >= len(s) || s[j+1] != '(' {
		return "", "", 0, false
	}
	end := x.after(x.parens, j+2)
	if end < 0 {
		return "", "", 0, false
	}
	url = strings.TrimSpace(s[j+2 : end])
	lower := strings.ToLower(url)
	if strings.ContainsAny(url, " \t") || !(strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") ||
		strings.HasPrefix(lower, "mailto:") || strings.HasPrefix(lower, "tg://")) {
		return "", "", 0, false
	}
	text = s[i+1 : j]
	if strings.TrimSpace(text) == "" {
		return "", "", 0, false
	}
	return text, url, end + 1 - i, true
}

func isWordByte(b byte) bool {
	r := rune(b)
	return b >= utf8.RuneSelf || unicode.IsLetter(r) || unicode.IsDigit(r)
}
