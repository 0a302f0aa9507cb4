package bridgetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/chat/chattest"
	"loadout/httpd"
)

// The kill suite: the program serving one channel is killed (SIGKILL:
// nothing runs at exit) at random moments, unrelated to what it is
// doing, while several chats have messages in flight, and started again
// at once. Every message must be answered once, in its chat's order, and
// nothing may be set aside as poison. It runs the real program (the
// caller's launch), configured by a config.yaml the suite writes, so
// what is killed is what an operator runs.

// Kill-suite sizes: several chats in flight at every kill.
const (
	// KillChats is how many chats write at once.
	KillChats = 6
	// KillMessages is how many messages each chat writes, in order.
	KillMessages = 5
	// KillTimes is how many times the process is killed.
	KillTimes = 10
)

// Killed is one channel under the kill suite.
type Killed struct {
	// Config is the channel's section of config.yaml, pointing at its
	// platform's fake ("signal:\n  enabled: true\n  …"), with its pacing
	// off so the run is quick.
	Config string
	// Send hands text, chat c's next message, to the platform as a
	// person would, and returns once the platform has it: for a webhook
	// platform, it posts to the process's HTTP listener at addr, again
	// and again as the platform does, until it is answered 200.
	Send func(t testing.TB, addr string, c int, text string)
	// Answers is what each chat (0 ≤ c < KillChats) was answered so far,
	// in order, as plain texts. A part the platform shows once (the same
	// Message-ID sent again) is counted once.
	Answers func() [][]string
	// WhileDown: the platform keeps what is sent while the process is
	// down (Send returns at once), so the suite makes sure people write
	// while it is: after a kill it starts the process again only once
	// a message was sent, while any are left.
	WhileDown bool
	// Ready, when set, reports whether the first process has reached
	// the platform: people write only then.
	Ready func() bool
	// Loses, when set, says why the platform may lose the message in
	// flight at a kill: it hands each message over once and takes no
	// acknowledgement, so one taken by a process killed before it could
	// store it is gone. The suite then lets one message a kill go
	// unanswered (and only that: the rest are answered once, in order),
	// and knows the run is over when a last message of each chat, sent
	// after the kills, is answered. The channel's documentation must say
	// so too.
	Loses string
	// Check, when set, checks what is specific to the channel once every
	// message is answered, given what all the processes logged.
	Check func(t *testing.T, log string)
}

// Launch makes the command that runs the program under test, serving
// the config file at path. The suite starts it, and kills it.
type Launch func(t testing.TB, path string) *exec.Cmd

// asked is what a chat's message says: chat and number.
var asked = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`c\d+ m\d+`) })

// killText is message m of chat c; its answer is "Answer to " and it.
func killText(c, m int) string { return fmt.Sprintf("c%d m%d", c, m) }

// Kills runs the program on ch, kills it KillTimes times at random moments
// and starts it again at once, then checks each chat's answers.
func Kills(t *testing.T, ch Killed, launch Launch) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	dir := t.TempDir()
	model := chattest.NewModelServer(t)
	model.Forget = true
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	random := func(lo, n int) time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		return time.Duration(lo+rng.IntN(n)) * time.Millisecond
	}
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		text := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				text = m.Content
			}
		}
		return chattest.Step{Text: "Answer to " + asked().FindString(text), Delay: random(200, 400)}
	}
	addr := FreeAddr(t)
	path := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-kills\nstore:\n  path: %s\nhttp:\n  listen: %s\n  metrics: false\nlog:\n  level: info\n%s",
		model.URL, filepath.Join(dir, "loadout.db"), addr, ch.Config)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &killedProcess{t: t, launch: launch, path: path}
	p.start()
	if ch.Ready != nil {
		Await(t, "the first process to reach the platform", ch.Ready)
	}
	// Each chat's person writes in order, each message once the one
	// before was taken and a moment has passed; the chats write at once.
	var (
		senders sync.WaitGroup
		sent    atomic.Int32
	)
	for c := range KillChats {
		senders.Go(func() {
			for m := range KillMessages {
				time.Sleep(random(20, 400))
				ch.Send(t, addr, c, killText(c, m))
				sent.Add(1)
			}
		})
	}
	answered := func() int {
		n := 0
		for _, a := range ch.Answers() {
			n += len(a)
		}
		return n
	}
	total := KillChats * KillMessages
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	done := func() bool { return answered() >= total }
	if ch.Loses != "" {
		// What was lost is never answered: the run is over once the
		// senders are done and a last message of each chat, after them,
		// is answered.
		done = func() bool { return int(sent.Load()) == total }
	}
	for !done() || kills < KillTimes {
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes and %d kills, %d of %d messages are answered:\n%q\n%s", kills, answered(), total, ch.Answers(), p.log())
		}
		if kills < KillTimes {
			time.Sleep(random(20, 500)) // a moment unrelated to what the process does
			if kills == KillTimes/2 {
				// One life is stopped as an operator stops it, with
				// messages in flight: it ends cleanly, and what its stop
				// cuts is not logged as a failure.
				// A stop before the process handles signals (its packages
				// still initialising) ends it as SIGTERM does any program.
				Await(t, "the process to serve", func() bool { return httpd.Check(context.Background(), addr, "", io.Discard) == nil })
				from := len(p.log())
				if err := p.stop(); err != nil {
					t.Errorf("a process stopped with messages in flight did not end cleanly: %v\n%s", err, Tail(p.log()[from:], 3000))
				}
				if cut := grep(p.log()[from:], "level=ERROR"); cut != "" {
					t.Errorf("a stop with messages in flight was logged as a failure:\n%s", cut)
				}
			} else {
				p.kill()
			}
			kills++
			if ch.WhileDown {
				before := sent.Load()
				for wait := time.Now().Add(2 * time.Second); sent.Load() == before && sent.Load() < int32(total) && time.Now().Before(wait); {
					time.Sleep(5 * time.Millisecond)
				}
			}
			p.start()
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	senders.Wait()
	if ch.Loses != "" {
		for c := range KillChats {
			ch.Send(t, addr, c, killText(c, KillMessages))
		}
		Await(t, "the last message of every chat to be answered", func() bool {
			for c, a := range ch.Answers() {
				if !slices.Contains(a, "Answer to "+killText(c, KillMessages)) {
					return false
				}
			}
			return true
		})
	}
	time.Sleep(time.Second) // anything sent twice arrives now
	log := p.log()
	if strings.Contains(log, "quarantine") {
		t.Errorf("a message was quarantined:\n%s", grep(log, "quarantine"))
	}
	doubled, lost := 0, 0
	for c, got := range ch.Answers() {
		var want []string
		for m := range KillMessages {
			want = append(want, "Answer to "+killText(c, m))
		}
		// A part the platform took as the process died, before it could
		// hear so, goes again after the restart: the one repeat no
		// channel can rule out, and never more than once a kill.
		once := slices.Compact(slices.Clone(got))
		doubled += len(got) - len(once)
		if ch.Loses != "" {
			want = append(want, "Answer to "+killText(c, KillMessages))
			n, ok := lostFrom(once, want)
			lost += n
			if !ok {
				t.Errorf("chat %d was answered %q, want %q in order, each once, some perhaps lost", c, got, want)
			}
			continue
		}
		if !slices.Equal(once, want) {
			t.Errorf("chat %d was answered %q, want %q", c, got, want)
		}
	}
	if doubled > kills {
		t.Errorf("%d answers went twice in %d kills", doubled, kills)
	}
	if lost > kills {
		t.Errorf("%d messages were lost in %d kills, more than the one a kill the platform may lose (%s)", lost, kills, ch.Loses)
	}
	if ch.Check != nil && !t.Failed() {
		ch.Check(t, log)
	}
	// The last life is stopped as an operator stops it: it ends cleanly,
	// and what its stop cuts is not logged as a failure.
	if err := p.stop(); err != nil {
		t.Errorf("the last process did not stop cleanly: %v", err)
	}
	if cut := grep(p.log()[len(log):], "level=ERROR"); cut != "" {
		t.Errorf("the stop was logged as a failure:\n%s", cut)
	}
	t.Logf("%d messages in %d chats, %d kills; %d answers sent again after a kill, %d messages lost", total, KillChats, kills, doubled, lost)
}

// lostFrom reports how many of want got leaves out, when got is want
// with some left out, in order; ok is false when got is not.
func lostFrom(got, want []string) (lost int, ok bool) {
	i := 0
	for _, g := range got {
		for i < len(want) && want[i] != g {
			i++
		}
		if i == len(want) {
			return 0, false
		}
		i++
	}
	return len(want) - len(got), true
}

// killedProcess is the program's current life: started, killed, and
// started again, its lives' logs kept in one buffer.
type killedProcess struct {
	t      *testing.T
	launch Launch
	path   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	exit error         // how it exited, once done is closed
	logs bytes.Buffer
}

func (p *killedProcess) start() {
	c := p.launch(p.t, p.path)
	c.Stdout, c.Stderr = p, p
	if err := c.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { p.exit = c.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.done = c, exited
	p.mu.Unlock()
	p.t.Cleanup(func() { c.Process.Kill(); <-exited })
}

// stop ends the current life with SIGTERM and returns how it exited.
func (p *killedProcess) stop() error {
	p.mu.Lock()
	p.cmd.Process.Signal(syscall.SIGTERM)
	exited := p.done
	p.mu.Unlock()
	<-exited
	return p.exit
}

func (p *killedProcess) kill() {
	p.mu.Lock()
	p.cmd.Process.Signal(syscall.SIGKILL)
	exited := p.done
	p.mu.Unlock()
	<-exited
}

// Write keeps what a life logged: the logs of one life and the next may
// overlap for a moment.
func (p *killedProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

func (p *killedProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// grep is the lines of text that contain word.
func grep(text, word string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// FreeAddr is a loopback address nothing listens on now.
func FreeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Tail is the last n bytes of a process's log s, for a failure message.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// PostUntilTaken delivers an event to a webhook as its platform does:
// the request try builds (try counts from 0, so a platform that numbers
// its retries can say so, and one that signs each delivery anew can) is
// posted again and again, each waiting 3 s for its answer, until one is
// answered 2xx, for up to AwaitFor; then it fails the test, naming what.
func PostUntilTaken(t testing.TB, what string, try func(n int) *http.Request) {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(AwaitFor)
	for n := 0; time.Now().Before(deadline); n++ {
		if resp, err := client.Do(try(n)); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%s was never taken", what)
}
