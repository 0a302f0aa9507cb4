package tokens

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCountUsesO200k(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	// Reference counts from OpenAI's tokenizer for o200k_base.
	cases := map[string]int{"": 0, "hello world": 2, "Hello, world!": 4}
	for s, want := range cases {
		if got := c.Count(s); got != want {
			t.Errorf("Count(%q) = %d, want %d", s, got, want)
		}
	}
	// A character estimate would give 25 for this; o200k gives far fewer.
	if got := c.Count("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); got >= 25 {
		t.Errorf("100 a's counted as %d tokens; not a real tokenizer", got)
	}
}

func TestPiecesKeepEveryByte(t *testing.T) {
	inputs := []string{
		"", "short", strings.Repeat("a", 1000), strings.Repeat("word ", 10000),
		strings.Repeat("日本語", 500), strings.Repeat("x", 300) + " " + strings.Repeat("é", 400),
	}
	for _, in := range inputs {
		parts := pieces(in, maxPiece)
		if strings.Join(parts, "") != in {
			t.Fatalf("pieces of a %d-byte input do not join back to it", len(in))
		}
		for _, p := range parts {
			if !utf8.ValidString(p) {
				t.Fatalf("a piece cuts a rune: %q", p)
			}
			for _, w := range strings.Fields(p) {
				if len(w) > maxPiece {
					t.Fatalf("a run of %d bytes without space reached the encoder", len(w))
				}
			}
		}
	}
}

// Cutting long text into pieces changes the exact count by little.
func TestCountOfLongTextIsExactEnough(t *testing.T) {
	c, _ := New()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	enc, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	whole := len(enc.Encode(text, nil, nil))
	if got := c.Count(text); got < whole-len(pieces(text, maxPiece)) || got > whole+len(pieces(text, maxPiece)) {
		t.Fatalf("Count = %d, the whole text encodes to %d", got, whole)
	}
}

// BenchmarkCount counts ordinary and hostile text of growing size, exactly
// and estimated; MB/s stays flat when the cost is linear.
func BenchmarkCount(b *testing.B) {
	c, _ := New()
	c.load()
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		for name, unit := range map[string]string{"prose": "The quick brown fox jumps over the lazy dog. ", "nospace": "abcdefghij"} {
			in := strings.Repeat(unit, size/len(unit)+1)[:size]
			b.Run(fmt.Sprintf("Count/%s/%dKB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					c.Count(in)
				}
			})
			b.Run(fmt.Sprintf("Estimate/%s/%dKB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					Estimate(in)
				}
			})
		}
	}
}
