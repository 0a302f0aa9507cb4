package tokens

import (
	"unicode"
	"unicode/utf8"
)

// Estimate approximates the o200k_base token count of s in one pass over
// its runes, without the vocabulary: it splits s into the pieces the
// encoding's pre-tokenizer would (words, split where a lower-case letter
// meets a capital; digit groups; punctuation runs; line breaks and
// indentation) and charges each piece by its kind and length. Its cost is
// linear in len(s) whatever s holds, so it is what budgets history and
// trims it on every message; the exact Count is for the places people
// read a figure.
func Estimate(s string) int {
	var e estimator
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		e.add(r)
		i += size
	}
	e.flush()
	return int(e.total + 0.5)
}

type pieceKind int

const (
	pieceNone pieceKind = iota
	pieceWord
	pieceWide // a script written without spaces (Han, kana, Hangul, Thai)
	pieceDigits
	piecePunct
	pieceSpace
	pieceNewline
)

type estimator struct {
	kind   pieceKind
	n      int     // runes in the current piece
	ascii  bool    // the current word is all ASCII
	lower  bool    // the last letter of the current word was lower-case
	total  float64 // tokens of the finished pieces
	spaces int     // spaces in the current space run
}

func (e *estimator) add(r rune) {
	switch {
	case r == '\n' || r == '\r':
		if e.kind != pieceNewline {
			e.flush()
			e.kind = pieceNewline
		}
		e.n++
	case r == ' ' || r == '\t' || unicode.IsSpace(r):
		if e.kind != pieceSpace {
			e.flush()
			e.kind = pieceSpace
		}
		e.n++
	case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r):
		if wide(r) {
			if e.kind != pieceWide {
				e.flush()
				e.kind = pieceWide
			}
			e.n++
			return
		}
		upper := unicode.IsUpper(r)
		if e.kind != pieceWord || (upper && e.lower) {
			if e.kind == piecePunct {
				// One mark before a word ("(ctx", ".Logger", " \"name")
				// belongs to the word's piece.
				e.n--
				e.total += joined
			}
			e.flush()
			e.kind, e.ascii = pieceWord, true
		}
		e.n++
		e.ascii = e.ascii && r < utf8.RuneSelf
		e.lower = !upper
	case unicode.IsDigit(r) || unicode.IsNumber(r):
		if e.kind != pieceDigits {
			e.flush()
			e.kind = pieceDigits
		}
		e.n++
	default:
		if e.kind != piecePunct {
			e.flush()
			e.kind = piecePunct
		}
		e.n++
	}
}

// Weights of flush, and what a mark joined to the next word costs.
const (
	joined    = 0.25
	punctRest = 0.3
)

// flush charges the current piece. The weights were fitted against o200k
// on prose, Markdown, Go, YAML and JSON (see estimate_test.go).
func (e *estimator) flush() {
	n := float64(e.n)
	switch e.kind {
	case pieceWord:
		if e.ascii {
			// Common words are one token; long ones split about every
			// six letters.
			e.total += 1 + max(0, n-7)/6
		} else {
			// Other alphabets (Cyrillic, Greek, Arabic, accents) split
			// more.
			e.total += 1 + max(0, n-3)/3
		}
	case pieceWide:
		e.total += n * 0.8
	case pieceDigits:
		e.total += float64((e.n + 2) / 3)
	case piecePunct:
		if e.n > 0 {
			e.total += 1 + (n-1)*punctRest
		}
	case pieceSpace:
		// One space joins the next piece; indentation is a token or so.
		if e.n > 1 {
			e.total += 1 + float64(e.n-1)/16
		}
	case pieceNewline:
		e.total += 1
	}
	e.kind, e.n, e.lower = pieceNone, 0, false
}

// wide reports whether r belongs to a script written without spaces
// between words, where o200k spends about a token per character or two.
func wide(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Thai)
}
