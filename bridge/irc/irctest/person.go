package irctest

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// Line is a message a person received: who sent it, to whom (the
// person's nick, or a channel), whether it was a NOTICE, and its text.
type Line struct {
	From, To, Text string
	Notice         bool
}

// Person is someone on the network: a raw IRC client, signed in to an
// account or not, that records the messages it receives.
type Person struct {
	Nick  string
	Heard bridgetest.Recorder[Line]
	c     net.Conn
	wmu   sync.Mutex
	done  chan struct{}
}

// Connect connects nick to the network's plain port, signed in with
// SASL to account with password when account is not "", and returns
// once the server has welcomed it. The person quits when t ends.
func (n *Network) Connect(t testing.TB, nick, account, password string) *Person {
	t.Helper()
	c, err := net.DialTimeout("tcp", n.Plain, 5*time.Second)
	if err != nil {
		t.Fatalf("irctest: connect %s: %v", nick, err)
	}
	p := &Person{Nick: nick, c: c, done: make(chan struct{})}
	welcome := make(chan error, 1)
	go p.loop(account, password, welcome)
	p.send("CAP LS 302", "NICK "+nick, "USER "+nick+" 0 * :"+nick)
	select {
	case err := <-welcome:
		if err != nil {
			t.Fatalf("irctest: %s could not sign in: %v", nick, err)
		}
	case <-time.After(bridgetest.Wait):
		t.Fatalf("irctest: %s was not welcomed within %s", nick, bridgetest.Wait)
	}
	t.Cleanup(p.Quit)
	return p
}

// loop reads the server's lines: it negotiates SASL during
// registration, answers pings, and records messages.
func (p *Person) loop(account, password string, welcome chan error) {
	defer close(p.done)
	r := bufio.NewReader(p.c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tell(welcome, err)
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "@") {
			_, line, _ = strings.Cut(line, " ")
		}
		source := ""
		if strings.HasPrefix(line, ":") {
			source, line, _ = strings.Cut(line[1:], " ")
		}
		from, _, _ := strings.Cut(source, "!")
		cmd, rest, _ := strings.Cut(line, " ")
		args, trailing, _ := strings.Cut(rest, " :")
		_, sub, _ := strings.Cut(args, " ")
		switch {
		case cmd == "PING":
			p.send("PONG " + rest)
		case cmd == "CAP" && sub == "LS" && account != "":
			p.send("CAP REQ :sasl")
		case cmd == "CAP" && sub == "ACK":
			p.send("AUTHENTICATE PLAIN")
		case cmd == "CAP" && (sub == "LS" || sub == "NAK"), cmd == "903":
			p.send("CAP END")
		case cmd == "AUTHENTICATE":
			p.send("AUTHENTICATE " + base64.StdEncoding.EncodeToString([]byte(account+"\x00"+account+"\x00"+password)))
		case cmd == "904" || cmd == "905":
			tell(welcome, fmt.Errorf("SASL failed: %s", trailing))
		case cmd == "001":
			tell(welcome, nil)
		case cmd == "PRIVMSG" || cmd == "NOTICE":
			p.Heard.Add(Line{From: from, To: args, Text: trailing, Notice: cmd == "NOTICE"})
		case cmd == "PONG" || cmd == "401": // a ping's answer; no such nick
			p.Heard.Add(Line{From: cmd, To: args, Text: trailing})
		}
	}
}

// tell tells Connect how registering went, the first time.
func tell(welcome chan error, err error) {
	select {
	case welcome <- err:
	default:
	}
}

func (p *Person) send(lines ...string) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for _, l := range lines {
		fmt.Fprintf(p.c, "%s\r\n", l)
	}
}

// Raw sends one line as it is.
func (p *Person) Raw(line string) { p.send(line) }

// Say sends text to target (a nick or a channel).
func (p *Person) Say(_ testing.TB, target, text string) { p.send("PRIVMSG " + target + " :" + text) }

// Join joins channel, with key when it is not "".
func (p *Person) Join(channel, key string) { p.send(strings.TrimSpace("JOIN " + channel + " " + key)) }

// From is what from sent the person privately, or to channel when it is
// not "": the texts of its PRIVMSGs, in order.
func (p *Person) From(from, channel string) []string { return p.texts(from, channel, false) }

// Notices are the texts of the NOTICEs from sent the person.
func (p *Person) Notices(from string) []string { return p.texts(from, "", true) }

func (p *Person) texts(from, channel string, notice bool) []string {
	var out []string
	for _, l := range p.Heard.All() {
		to := strings.HasPrefix(l.To, "#") && strings.EqualFold(l.To, channel) || channel == "" && !strings.HasPrefix(l.To, "#")
		if strings.EqualFold(l.From, from) && l.Notice == notice && to {
			out = append(out, l.Text)
		}
	}
	return out
}

// Quit leaves the network; again does nothing.
func (p *Person) Quit() {
	p.send("QUIT :bye")
	p.c.SetDeadline(time.Now().Add(time.Second))
	<-p.done
	p.c.Close()
}
