package whatsapp

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkFormat converts answers of growing size, ordinary and
// hostile (openers that never close, a line without spaces); the MB/s
// column stays flat when the cost is linear.
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkFormat ./bridge/whatsapp/
func BenchmarkFormat(b *testing.B) {
	units := map[string]string{
		"prose": "Some **bold** words and a [link](https://example.org) here.\n\n",
		"stars": "*a ", "brackets": "[a ", "backticks": "`a ", "tildes": "~~a ", "nospace": "abcdefghij",
	}
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		for name, unit := range units {
			in := strings.Repeat(unit, size/len(unit)+1)[:size]
			b.Run(fmt.Sprintf("%s/%dKB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					Format(in)
				}
			})
		}
	}
}
