package console

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/reeflective/readline"
	"golang.org/x/term"
)

// Interactive reports whether a console on in and out edits lines at a
// terminal: in is the process's standard input, out its standard output,
// and both are terminals. The line editor reads and draws on those two
// directly, so any other reader or writer is used line by line.
func Interactive(in io.Reader, out io.Writer) bool {
	i, ok := in.(*os.File)
	o, ok2 := out.(*os.File)
	return ok && ok2 && i.Fd() == os.Stdin.Fd() && o.Fd() == os.Stdout.Fd() &&
		term.IsTerminal(int(i.Fd())) && term.IsTerminal(int(o.Fd()))
}

// pasteOff turns bracketed paste off; the line editor turns it on only
// while it reads.
const pasteOff = "\x1b[?2004l"

// terminal is the line editor on standard input and output: Emacs keys
// (or the person's ~/.inputrc), history on Up, Down and Ctrl-R, and
// bracketed paste, so a pasted block stays one line until Enter.
type terminal struct {
	shell *readline.Shell
	fd    int
	saved *term.State
}

// newTerminal prepares the editor; history is kept in historyFile, or in
// memory when it is empty.
func newTerminal(prompt, historyFile string) (*terminal, error) {
	fd := int(os.Stdin.Fd())
	saved, err := term.GetState(fd)
	if err != nil {
		return nil, err
	}
	sh := readline.NewShell()
	sh.Prompt.Primary(func() string { return prompt })
	sh.Config.Set("enable-bracketed-paste", true)
	// Every prompt starts a line, so its width says where the input starts
	// and the terminal need not be asked (not all of them answer).
	sh.Config.Set("cursor-position-probe", false)
	if historyFile != "" {
		sh.History.AddFromFile("history", historyFile)
	}
	return &terminal{shell: sh, fd: fd, saved: saved}, nil
}

// hint shows note under the prompt until the line is accepted. It is safe
// to call from any goroutine.
func (t *terminal) hint(note string) { t.shell.Hint.SetTransient(note) }

// restore puts the terminal back as newTerminal found it; it is needed
// only when a read is cut short, since a finished read restores it.
func (t *terminal) restore() {
	term.Restore(t.fd, t.saved)
	os.Stdout.WriteString(pasteOff)
}

// terminalLines returns a reader of one message per accepted line. Ctrl-C
// drops the line being typed and reads again, or ends the input (io.EOF)
// when the line is empty; so does Ctrl-D on an empty line.
func (c *Console) terminalLines(t *terminal) func() (string, error) {
	return func() (string, error) {
		for {
			c.setPrompting(true)
			line, err := t.shell.Readline()
			c.setPrompting(false)
			t.shell.Hint.ClearTransient()
			if errors.Is(err, readline.ErrInterrupt) {
				if strings.TrimSpace(line) != "" {
					continue
				}
				err = io.EOF
			}
			return line, err
		}
	}
}
