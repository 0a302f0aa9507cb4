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
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	add := func(piece string) {
		sep := ""
		if cur.Len() > 0 {
			sep = "\n\n"
		}
		if runes(cur.String())+runes(sep)+runes(piece) > limit {
			flush()
			sep = ""
		}
		cur.WriteString(sep)
		cur.WriteString(piece)
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

// hardWrap cuts a line longer than n, between words when words is set.
func hardWrap(line string, n int, words bool) []string {
	var out []string
	for runes(line) > n {
		r := []rune(line)
		cut := n
		if words {
			if i := strings.LastIndex(string(r[:n]), " "); i > n/2 {
				cut = utf8.RuneCountInString(string(r[:n])[:i])
			}
		}
		out = append(out, strings.TrimRight(string(r[:cut]), " "))
		line = strings.TrimLeft(string(r[cut:]), " ")
	}
	return append(out, line)
}

func runes(s string) int { return utf8.RuneCountInString(s) }
