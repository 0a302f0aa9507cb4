package tools

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Window returns at most max characters (runes) of text from the
// character offset, the text's length in characters, and where the next
// part starts (0 when this part reaches the end), so a tool can hand a
// long text to the model in parts. It runs in time linear in the text.
func Window(text string, offset, max int) (part string, total, next int) {
	total = utf8.RuneCountInString(text)
	if offset >= total {
		return "", total, 0
	}
	start, n := 0, 0
	for i := range text {
		if n == offset {
			start = i
			break
		}
		n++
	}
	rest := text[start:]
	k := 0
	for i := range rest {
		if k == max {
			return rest[:i], total, offset + max
		}
		k++
	}
	return rest, total, 0
}

// SearchTerms are the words of a search query, lowercased, without
// repeats, at most 20: letters and digits only, so no query syntax of a
// search engine can slip through.
func SearchTerms(q string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !seen[w] && len(out) < 20 {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
