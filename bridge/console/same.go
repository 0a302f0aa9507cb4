package console

import (
	"io"
	"os"

	"golang.org/x/term"
)

// SameTerminal reports whether a and b are the same terminal (standard
// error and standard output both at the console: log lines would land
// in the conversation).
func SameTerminal(a, b io.Writer) bool {
	fa, ok := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok || !ok2 || !term.IsTerminal(int(fa.Fd())) {
		return false
	}
	sa, err := fa.Stat()
	sb, err2 := fb.Stat()
	return err == nil && err2 == nil && os.SameFile(sa, sb)
}
