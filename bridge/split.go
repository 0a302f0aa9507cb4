package bridge

import (
	"strings"
	"unicode/utf8"
)

// Split cuts Markdown text into chunks of at most limit characters, in
// order. It breaks between paragraphs where it can, else between lines,
// else between words, and only as a last resort inside a word. It never
// leaves a code block open across chunks: a code block longer than limit is
// closed at the end of one chunk and reopened, with its language, at the
// start of the next.
func Split(text string, limit int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if limit < 32 {
		limit = 32
	}
	if runes(text) <= limit {
		return []string{text}
	}
	var out []string
	var cur strings.Builder
	size := 0 // runes in cur
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
		size = 0
	}
	add := func(piece string) {
		n := runes(piece)
		if size > 0 && size+2+n > limit {
			flush()
		}
		if size > 0 {
			cur.WriteString("\n\n")
			size += 2
		}
		cur.WriteString(piece)
		size += n
	}
	for _, b := range blocks(text) {
		if runes(b.text) <= limit {
			add(b.text)
			continue
		}
		for _, p := range splitBlock(b, limit) {
			add(p)
		}
	}
	flush()
	return out
}

type block struct {
	text  string
	fence string // opening fence line of a code block, "" for prose
}

// blocks splits text into paragraphs and whole code blocks.
func blocks(text string) []block {
	var out []block
	var cur []string
	fence := ""
	emit := func() {
		if len(cur) > 0 {
			out = append(out, block{text: strings.Join(cur, "\n"), fence: fence})
		}
		cur = nil
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			emit()
			fence = trimmed
			cur = append(cur, line)
		case fence != "" && strings.HasPrefix(trimmed, "```"):
			cur = append(cur, line)
			emit()
			fence = ""
		case fence == "" && trimmed == "":
			emit()
		default:
			cur = append(cur, line)
		}
	}
	if fence != "" { // unclosed block: close it
		cur = append(cur, "```")
	}
	emit()
	return out
}

// splitBlock cuts one over-long block into pieces of at most limit.
func splitBlock(b block, limit int) []string {
	lines := strings.Split(b.text, "\n")
	open, close := "", ""
	if b.fence != "" {
		open, close = b.fence+"\n", "\n```"
		lines = lines[1:]
		if n := len(lines); n > 0 && strings.HasPrefix(strings.TrimSpace(lines[n-1]), "```") {
			lines = lines[:n-1]
		}
	}
	room := limit - runes(open) - runes(close)
	var out []string
	var cur []string
	size := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, open+strings.Join(cur, "\n")+close)
		}
		cur, size = nil, 0
	}
	for _, line := range lines {
		for _, part := range hardWrap(line, room, b.fence == "") {
			n := runes(part)
			if len(cur) > 0 && size+1+n > room {
				flush()
			}
			if len(cur) > 0 {
				size++
			}
			cur = append(cur, part)
			size += n
		}
	}
	flush()
	return out
}

// hardWrap cuts a line longer than n runes, between words when words is
// set. It walks the line once.
func hardWrap(line string, n int, words bool) []string {
	if runes(line) <= n {
		return []string{line}
	}
	var out []string
	for line != "" {
		// end is the byte offset after n runes, lastSpace that of the
		// last space before it.
		end, count, lastSpace := 0, 0, -1
		for end < len(line) && count < n {
			if line[end] == ' ' {
				lastSpace = end
			}
			_, size := utf8.DecodeRuneInString(line[end:])
			end += size
			count++
		}
		if end == len(line) {
			out = append(out, line)
			break
		}
		cut := end
		if words && lastSpace > 0 && utf8.RuneCountInString(line[:lastSpace]) > n/2 {
			cut = lastSpace
		}
		out = append(out, strings.TrimRight(line[:cut], " "))
		line = strings.TrimLeft(line[cut:], " ")
	}
	return out
}

func runes(s string) int { return utf8.RuneCountInString(s) }
