// Package console is the terminal channel: a REPL over the same router,
// engine, store and delivery pipeline as every other channel. A message is
// stored before it is handled, so one typed just before a crash is
// answered at the next start.
//
// At a terminal the person edits lines in place, recalls earlier ones and
// pastes several lines as one message (see Interactive); from a pipe or a
// file every line is one message.
package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"loadout/bridge"
	"loadout/chat"
)

// Config configures a Console.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// In and Out carry the conversation. When Interactive(In, Out), lines
	// are edited at the terminal; otherwise In is read one line at a time.
	In  io.Reader `yaml:"-"`
	Out io.Writer `yaml:"-"`
	// User names the person; the chat key is "console:<User>". Default "local".
	User string `yaml:"user"`
	// Prompt is printed before each line is read; default "you> ".
	Prompt string `yaml:"-"`
	// HistoryFile keeps the lines typed at a terminal across runs, one
	// JSON object per line, created with mode 0600. Empty keeps them for
	// this run only. Unused when In is not a terminal.
	HistoryFile string `yaml:"-"`
	// Stream prints an answer as the model writes it. Default off.
	Stream bool `yaml:"stream"`
}

// Console reads one message at a time and prints each reply.
type Console struct {
	cfg  Config
	pipe *bridge.Pipeline
	seq  int

	mu sync.Mutex // guards writes to Out, prompting, held and hint
	// prompting is set while the terminal prompt is up: an answer that
	// arrives then (one resumed or retried in the background) is held
	// back and printed once the prompt returns, so it never breaks into
	// the line being typed.
	prompting bool
	held      []string
	hint      func(string) // shows a note under the prompt; set at a terminal
	// drafted is the streamed text printed so far of the answer on its
	// way.
	drafted string
	// asking are the approvals the last answer asked for, in order:
	// the next line "y", "n" (or "a" where "Always allow" is offered)
	// answers the first of them.
	asking []bridge.Question
	// current is the event of the message under way; interrupted is set
	// once Ctrl-C stopped its turn.
	current     string
	interrupted bool

	// want asks the reader for a line and got brings it (set by Run);
	// owed is set when a line was asked for and not taken, so the next
	// read takes it instead of asking again.
	want chan struct{}
	got  chan lineRead
	owed bool
}

// lineRead is one line read, or why none was.
type lineRead struct {
	text string
	err  error
}

// New returns a console over router that keeps its messages in inbox.
func New(cfg Config, router *bridge.Router, inbox bridge.Inbox) *Console {
	if cfg.User == "" {
		cfg.User = "local"
	}
	if cfg.Prompt == "" {
		cfg.Prompt = "you> "
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Console{cfg: cfg}
	c.pipe = bridge.NewPipeline(cfg.Delivery.Pipeline(bridge.PipelineConfig{
		Channel: "console", Inbox: inbox, Handler: withQuit{router}, Outlet: c, Workers: 1, Stream: cfg.Stream, DraftEvery: draftEvery,
	}))
	return c
}

// quitHelp is the line /help and /start gain in the console, the one
// channel where /quit means something.
const quitHelp = "\n/voice FILE — hear a local audio file as a voice note (typing its path does too)\n/quit — leave the console (Ctrl-D does too)"

// withQuit lists /quit in the router's answers to /help and /start.
type withQuit struct{ bridge.Handler }

func (h withQuit) Handle(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
	reply, err := h.Handler.Handle(ctx, in)
	if name, _, ok := bridge.ParseCommand(in.Text); ok && err == nil && (name == "help" || name == "start") {
		reply.Text += quitHelp
	}
	return reply, err
}

// ReadRoute: the console's one route is its chat key.
func (c *Console) ReadRoute(raw []byte) (any, error) { return string(raw), nil }

// ChatKey is the console's session key.
func (c *Console) ChatKey() string { return "console:" + c.cfg.User }

var _ bridge.Channel = (*Console)(nil)

// Name is the channel's name and chat-key prefix.
func (c *Console) Name() string { return "console" }

// Pipeline is the console's delivery pipeline.
func (c *Console) Pipeline() *bridge.Pipeline { return c.pipe }

// Route is the console's own chat key for its one chat; an error for any
// other.
func (c *Console) Route(chatKey string) ([]byte, error) {
	if chatKey != c.ChatKey() {
		return nil, fmt.Errorf("console: %q is not this console's chat", chatKey)
	}
	return []byte(chatKey), nil
}

// Private: the console is one person's.
func (c *Console) Private(chatKey string) bool { return chatKey == c.ChatKey() }

// Admits lets in the terminal's one person, whose key is the chat's
// (bridge.Admitter).
func (c *Console) Admits(_ context.Context, userKey string) (bool, error) {
	return userKey == c.ChatKey(), nil
}

var _ bridge.Admitter = (*Console)(nil)

// Split keeps an answer whole: a terminal has no size limit.
func (c *Console) Split(text string) []string { return []string{text} }

// Send prints one answer. While the terminal prompt is up the answer is
// held back, the person is told it is waiting, and it is printed as soon
// as the prompt returns or Run ends; Send then returns nil at once.
func (c *Console) Send(_ context.Context, _ any, part string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	part = strings.TrimRight(part, "\n")
	if c.prompting {
		c.held = append(c.held, part)
		note := "An answer is waiting: press Enter to read it."
		if len(c.held) > 1 {
			note = strconv.Itoa(len(c.held)) + " answers are waiting: press Enter to read them."
		}
		c.hint(note)
		return nil
	}
	_, err := fmt.Fprintf(c.cfg.Out, "%s\n", part)
	return err
}

// draftEvery is how often the console prints what has arrived of an
// answer: often enough to read as it comes.
const draftEvery = 30 * time.Millisecond

// consoleDraft is the console's one draft reference: the answer being
// printed.
const consoleDraft = "console"

// Draft prints what has arrived of an answer and was not printed yet. A
// text that does not continue what was printed (the model's next round)
// starts on a new line. While the prompt is up nothing is printed: the
// whole answer is held as usual.
func (c *Console) Draft(_ context.Context, _ any, _ []byte, text string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prompting {
		return []byte(consoleDraft), nil
	}
	if !strings.HasPrefix(text, c.drafted) {
		if c.drafted != "" {
			fmt.Fprint(c.cfg.Out, "\n")
		}
		c.drafted = ""
	}
	_, err := fmt.Fprint(c.cfg.Out, text[len(c.drafted):])
	c.drafted = text
	return []byte(consoleDraft), err
}

// Replace prints the rest of the answer's first part after what was
// streamed, or the part on a new line when it differs from it.
func (c *Console) Replace(ctx context.Context, route any, _ []byte, part string) error {
	c.mu.Lock()
	drafted := c.drafted
	c.drafted = ""
	if drafted != "" && !c.prompting {
		part = strings.TrimRight(part, "\n")
		if rest, ok := strings.CutPrefix(part, drafted); ok {
			_, err := fmt.Fprintf(c.cfg.Out, "%s\n", rest)
			c.mu.Unlock()
			return err
		}
		fmt.Fprint(c.cfg.Out, "\n")
	}
	c.mu.Unlock()
	return c.Send(ctx, route, part)
}

// Ask prints a question that waits for the person's approval, with its
// own prompt line naming its code, and takes the next line "y" or "n" as
// the answer.
func (c *Console) Ask(ctx context.Context, route any, part string, q bridge.Question, _ string) error {
	code := chat.CodeOf(q.ID)
	if q.Always != "" {
		part = strings.TrimRight(part, "\n") + fmt.Sprintf("\nApprove %s? [y/n] (or /approve %s, /deny %s later; a, or /always %s: always allow)", code, code, code, code)
	} else {
		part = strings.TrimRight(part, "\n") + fmt.Sprintf("\nApprove %s? [y/n] (or /approve %s, /deny %s later)", code, code, code)
	}
	err := c.Send(ctx, route, part)
	c.mu.Lock()
	c.asking = append(c.asking, q)
	c.mu.Unlock()
	return err
}

// answer turns a "y" or "n" (or "a") typed after questions into
// /approve or /deny (or /always) of the first still unanswered, so the
// calls of one answer are answered one line each; a command (/status,
// say) keeps the questions for the next line, and any other message
// leaves them waiting.
func (c *Console) answer(text string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.asking) == 0 || strings.HasPrefix(text, "/") {
		return text
	}
	q := c.asking[0]
	switch strings.ToLower(text) {
	case "y", "yes":
		c.asking = c.asking[1:]
		return "/approve " + q.ID
	case "n", "no":
		c.asking = c.asking[1:]
		return "/deny " + q.ID
	case "a", "always":
		if q.Always != "" {
			c.asking = c.asking[1:]
			return "/always " + q.ID
		}
	}
	c.asking = nil
	return text
}

// readLine reads the next line; ok is false when ctx ended first.
func (c *Console) readLine(ctx context.Context) (lineRead, bool) {
	c.mu.Lock()
	want, got, owed := c.want, c.got, c.owed
	c.owed = false
	c.mu.Unlock()
	if want == nil {
		return lineRead{err: io.EOF}, true
	}
	if !owed {
		select {
		case want <- struct{}{}:
		case <-ctx.Done():
			return lineRead{}, false
		}
	}
	select {
	case r := <-got:
		return r, true
	case <-ctx.Done():
		c.mu.Lock()
		c.owed = true
		c.mu.Unlock()
		return lineRead{}, false
	}
}

// Prompt shows a question a running tool asks and takes the next line
// typed as its answer (the console reads no other line while a message
// is under way). It returns ctx's error when ctx ends first, and io.EOF
// at the end of input.
func (c *Console) Prompt(ctx context.Context, route any, text string) (string, error) {
	if err := c.Send(ctx, route, strings.TrimRight(text, "\n")+"\n(Type your answer, or /cancel.)"); err != nil {
		return "", err
	}
	r, ok := c.readLine(ctx)
	if !ok {
		return "", ctx.Err()
	}
	return r.text, r.err
}

// SendFile shows a file the assistant sends: in a terminal, its path.
func (c *Console) SendFile(ctx context.Context, _ any, name string, f *os.File) error {
	return c.Send(ctx, nil, fmt.Sprintf("[file %s: %s]", name, f.Name()))
}

// setPrompting marks the terminal prompt up or down; taking it down
// prints the answers held back meanwhile.
func (c *Console) setPrompting(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prompting = up
	if up {
		return
	}
	for _, part := range c.held {
		fmt.Fprintf(c.cfg.Out, "%s\n", part)
	}
	c.held = nil
}

// Run answers messages left unanswered by an earlier run, then reads
// messages until end of input, /quit, or ctx is done. A message that
// fails is answered with a plain sentence and the loop goes on.
//
// At a terminal, Ctrl-D on an empty line ends the input; Ctrl-C drops the
// line being typed, or ends the input when the line is empty. Run then
// returns an error only when the terminal cannot be read. If ctx ends
// while a line is being typed, Run puts the terminal back as it found it
// and returns; the read that was waiting ends with the process.
func (c *Console) Run(ctx context.Context) error {
	defer c.pipe.Stop()
	if err := c.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	greeting := "Type a message, /help for commands, /quit to leave.\n"
	next := scanLines(c.cfg.In, c.cfg.Logger)
	interactive := Interactive(c.cfg.In, c.cfg.Out)
	if interactive {
		t, err := newTerminal(c.cfg.Prompt, c.cfg.HistoryFile)
		if err != nil {
			return err
		}
		defer t.restore()
		c.hint = t.hint
		next = c.terminalLines(t)
		greeting += "Up and Down recall earlier lines, Ctrl-R searches them; a pasted block is one message.\n"
	} else {
		greeting += c.cfg.Prompt
	}
	defer c.setPrompting(false) // prints what is still held back

	want, got, done := make(chan struct{}), make(chan lineRead), make(chan struct{})
	c.mu.Lock()
	c.want, c.got = want, got
	c.mu.Unlock()
	defer close(done)
	// Lines are read only when asked for: at a terminal the prompt must
	// not come up while an answer is being printed.
	go func() {
		for {
			select {
			case <-want:
			case <-done:
				return
			}
			text, err := next()
			select {
			case got <- lineRead{text, err}:
			case <-done:
				return
			}
		}
	}()

	c.print(greeting)
	for {
		r, ok := c.readLine(ctx)
		if !ok {
			c.print("\n")
			return nil
		}
		if r.err != nil {
			if !interactive {
				c.print("\n")
			}
			if errors.Is(r.err, io.EOF) {
				return nil
			}
			return fmt.Errorf("console: read the terminal: %w", r.err)
		}
		text := strings.TrimSpace(r.text)
		if text == "/quit" || text == "/exit" {
			return nil
		}
		if text != "" {
			c.handle(ctx, text)
		}
		if !interactive {
			c.print(c.cfg.Prompt)
		}
	}
}

// scanLines returns a reader of one message per line. It ends with io.EOF
// at the end of r, and also after a line longer than 1 MiB (logged).
func scanLines(r io.Reader, log *slog.Logger) func() (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	return func() (string, error) {
		if sc.Scan() {
			return sc.Text(), nil
		}
		if err := sc.Err(); err != nil {
			log.Warn("console input ends", "err", err)
		}
		return "", io.EOF
	}
}

func (c *Console) print(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprint(c.cfg.Out, s)
}

// Interrupt is Ctrl-C at a terminal while a message is under way: the
// first stops its turn ("Stopped.") and the console returns to the
// prompt; it reports false — the caller then ends the console — for a
// second Ctrl-C during the same message, or when no message is under way
// (at the prompt, the line editor reads Ctrl-C itself).
func (c *Console) Interrupt() bool {
	c.mu.Lock()
	id, again := c.current, c.interrupted
	if id != "" {
		c.interrupted = true
	}
	c.mu.Unlock()
	if id == "" || again {
		return false
	}
	if c.pipe.CancelTurn(id) {
		c.print("\nStopped.\n")
	}
	return true
}

// handle delivers one message and waits for its answer to be printed.
func (c *Console) handle(ctx context.Context, text string) {
	text = c.answer(text)
	c.seq++
	id := "line:" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(c.seq)
	c.mu.Lock()
	c.current, c.interrupted = id, false
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.current = ""
		c.mu.Unlock()
	}()
	pend := bridge.Pending{
		ID:      id,
		Inbound: chat.Inbound{ChatKey: c.ChatKey(), UserKey: c.ChatKey(), Text: text},
		Route:   []byte(c.ChatKey()),
	}
	if file, ok := voiceFile(text); ok {
		note, reply := c.takeVoice(ctx, file)
		if reply != "" {
			c.Send(ctx, nil, reply)
			return
		}
		pend.Inbound.Text, pend.Voice = "", note
	}
	err := c.pipe.Deliver(ctx, pend)
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, bridge.ErrTurnStopped):
	case errors.Is(err, bridge.ErrNotStored):
		c.cfg.Logger.Error("console message not stored", "err", err)
		c.Send(ctx, nil, bridge.TextNotSaved)
	default:
		// The pipeline has told the person what happened.
		c.cfg.Logger.Debug("console message not answered", "err", err)
	}
}
