// Package tokens counts tokens: Estimate, a linear-time approximation of
// the o200k_base encoding used on every message, and Counter, the exact
// o200k_base count (tiktoken-go with its vocabulary embedded, so counting
// works offline) for the figures people read.
package tokens

import (
	"fmt"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Counter counts tokens exactly. The vocabulary is loaded on the first
// Count (about half a second and 20 MB), not at start. It is safe for
// concurrent use.
type Counter struct {
	once sync.Once
	enc  *tiktoken.Tiktoken
	err  error
}

var setLoader sync.Once

// New returns a Counter; it loads nothing yet.
func New() (*Counter, error) { return &Counter{}, nil }

func (c *Counter) load() (*tiktoken.Tiktoken, error) {
	c.once.Do(func() {
		// tiktoken-go keeps its loader in a package variable; set it once
		// to the offline loader so no download is ever attempted.
		setLoader.Do(func() { tiktoken.SetBpeLoader(loader.NewOfflineLoader()) })
		c.enc, c.err = tiktoken.GetEncoding(tiktoken.MODEL_O200K_BASE)
		if c.err != nil {
			c.err = fmt.Errorf("tokens: load o200k_base: %w", c.err)
		}
	})
	return c.enc, c.err
}

// maxPiece bounds the text the byte-pair encoder sees at once: its merge
// is quadratic in a piece's length, so longer runs without spaces are cut
// (the count may differ from the uncut text's by a token per cut).
const maxPiece = 256

// Count returns the number of tokens in s, in time linear in len(s). If
// the vocabulary cannot be loaded it returns Estimate(s).
func (c *Counter) Count(s string) int {
	if s == "" {
		return 0
	}
	enc, err := c.load()
	if err != nil {
		return Estimate(s)
	}
	n := 0
	for _, part := range pieces(s, maxPiece) {
		n += len(enc.Encode(part, nil, nil))
	}
	return n
}

// pieces cuts s into parts of at most about 16 KB, at whitespace, with
// every run of more than max bytes without whitespace cut at rune
// boundaries into runs of at most max bytes.
func pieces(s string, max int) []string {
	const part = 16 << 10
	var out []string
	start, run := 0, 0 // start of the current part; bytes since whitespace
	lastSpace := -1
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			run, lastSpace = 0, i
		case run+size > max:
			out = append(out, s[start:i])
			start, run, lastSpace = i, 0, -1
		}
		if !unicode.IsSpace(r) {
			run += size
		}
		i += size
		if i-start >= part && lastSpace > start {
			out = append(out, s[start:lastSpace])
			start, lastSpace = lastSpace, -1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return slices.DeleteFunc(out, func(p string) bool { return p == "" })
}
