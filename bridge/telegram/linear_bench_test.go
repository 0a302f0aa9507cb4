package telegram

import (
	"fmt"
	"strings"
	"testing"
)

// inputs of a given size that stress splitting and formatting: prose,
// one line without spaces, and Markdown openers that never close.
func stressInputs(size int) map[string]string {
	rep := func(unit string) string { return strings.Repeat(unit, size/len(unit)+1)[:size] }
	return map[string]string{
		"prose":     rep("Some **bold** words and a [link](https://example.org) in a sentence.\n\n"),
		"nospace":   rep("abcdefghij"),
		"stars":     rep("*a "),
		"brackets":  rep("[a "),
		"backticks": rep("`a "),
	}
}

func BenchmarkFormatAndSplit(b *testing.B) {
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		for name, in := range stressInputs(size) {
			b.Run(fmt.Sprintf("HTML/%s/%dKB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					HTML(in)
				}
			})
			b.Run(fmt.Sprintf("Chunks/%s/%dKB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					Chunks(in, MaxMessage)
				}
			})
		}
	}
}
