package tools

import "unicode/utf8"

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
