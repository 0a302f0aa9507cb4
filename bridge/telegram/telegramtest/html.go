package telegramtest

import (
	"fmt"
	"strconv"
	"strings"
)

// Telegram's HTML parse mode, as sendMessage and editMessageText check
// a text sent with parse_mode HTML.

// allowedTags are the HTML tags Telegram accepts in parse_mode HTML.
var allowedTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true, "s": true,
	"strike": true, "del": true, "a": true, "code": true, "pre": true, "tg-spoiler": true,
	"span": true, "blockquote": true,
}

// CheckHTML parses text as Telegram's HTML parse mode does: only known
// tags, properly nested and closed, and only the entities &lt; &gt; &amp;
// &quot; and numeric ones. It returns the visible text.
func CheckHTML(text string) (string, error) {
	var out strings.Builder
	var stack []string
	for i := 0; i < len(text); {
		switch text[i] {
		case '<':
			j := strings.IndexByte(text[i:], '>')
			if j < 0 {
				return "", fmt.Errorf("unclosed start tag at byte offset %d", i)
			}
			tag := text[i+1 : i+j]
			if strings.HasPrefix(tag, "/") {
				name := strings.TrimSpace(tag[1:])
				if len(stack) == 0 || stack[len(stack)-1] != name {
					return "", fmt.Errorf("unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, last(stack), name)
				}
				stack = stack[:len(stack)-1]
			} else {
				name, _, _ := strings.Cut(tag, " ")
				if !allowedTags[name] {
					return "", fmt.Errorf("unsupported start tag %q at byte offset %d", name, i)
				}
				if top := last(stack); top == "code" || (top == "pre" && name != "code") || (name == "a" && contains(stack, "a")) {
					return "", fmt.Errorf("can't nest %q in %q at byte offset %d", name, top, i)
				}
				stack = append(stack, name)
			}
			i += j + 1
		case '&':
			j := strings.IndexByte(text[i:], ';')
			if j < 0 {
				return "", fmt.Errorf("unclosed entity at byte offset %d", i)
			}
			ent := text[i+1 : i+j]
			switch {
			case ent == "lt":
				out.WriteByte('<')
			case ent == "gt":
				out.WriteByte('>')
			case ent == "amp":
				out.WriteByte('&')
			case ent == "quot":
				out.WriteByte('"')
			case strings.HasPrefix(ent, "#"):
				n, err := strconv.Atoi(strings.TrimPrefix(ent, "#"))
				if err != nil {
					return "", fmt.Errorf("bad numeric entity at byte offset %d", i)
				}
				out.WriteRune(rune(n))
			default:
				return "", fmt.Errorf("unsupported entity %q at byte offset %d", ent, i)
			}
			i += j + 1
		case '>':
			return "", fmt.Errorf("unescaped '>' at byte offset %d", i)
		default:
			out.WriteByte(text[i])
			i++
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("can't find end tag corresponding to start tag %q", last(stack))
	}
	return out.String(), nil
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
