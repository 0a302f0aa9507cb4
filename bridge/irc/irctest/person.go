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

	c      net.Conn
	wmu    sync.Mutex
	joined bridgetest.Recorder[string]
	done   chan struct{}
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
	p.send("CAP LS 302")
	p.send("NICK " + nick)
	p.send("USER " + nick + " 0 * :" + nick)
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

// loop reads the server's lines: it negotiates capabilities and SASL
// during registration, answers pings, and records messages.
func (p *Person) loop(account, password string, welcome chan error) {
	defer close(p.done)
	r := bufio.NewReader(p.c)
	welcomed := false
	tell := func(err error) {
		if !welcomed {
			welcomed = true
			welcome <- err
		}
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tell(err)
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
		cmd, rest, _ := strings.Cut(line, " ")
		args, trailing, _ := strings.Cut(rest, " :")
		from, _, _ := strings.Cut(source, "!")
		switch cmd {
		case "PING":
			p.send("PONG " + rest)
		case "CAP":
			_, sub, _ := strings.Cut(args, " ")
			switch {
			case sub == "LS" && account != "":
				p.send("CAP REQ :sasl")
			case sub == "LS", sub == "NAK":
				p.send("CAP END")
			case sub == "ACK":
				p.send("AUTHENTICATE PLAIN")
			}
		case "AUTHENTICATE":
			p.send("AUTHENTICATE " + base64.StdEncoding.EncodeToString([]byte(account+"\x00"+account+"\x00"+password)))
		case "903":
			p.send("CAP END")
		case "904", "905":
			tell(fmt.Errorf("SASL failed: %s", trailing))
		case "001":
			tell(nil)
		case "JOIN":
			if from == p.Nick {
				p.joined.Add(strings.TrimPrefix(args+trailing, ":"))
			}
		case "PRIVMSG", "NOTICE":
			p.Heard.Add(Line{From: from, To: args, Text: trailing, Notice: cmd == "NOTICE"})
		}
	}
}

func (p *Person) send(line string) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	fmt.Fprintf(p.c, "%s\r\n", line)
}

// Say sends text to target (a nick or a channel).
func (p *Person) Say(t testing.TB, target, text string) {
	t.Helper()
	p.send("PRIVMSG " + target + " :" + text)
}

// Join joins channel (with key, when not "") and returns once it has.
func (p *Person) Join(t testing.TB, channel, key string) {
	t.Helper()
	p.send(strings.TrimSpace("JOIN " + channel + " " + key))
	bridgetest.WaitFor(t, p.Nick+" joining "+channel, &p.joined.Signal, func() bool {
		return len(p.joined.Filter(func(c string) bool { return strings.EqualFold(c, channel) })) > 0
	})
}

// From is what from sent the person, or to channel when channel is not
// "": the texts of its PRIVMSGs, in order.
func (p *Person) From(from, channel string) []string {
	var out []string
	for _, l := range p.Heard.All() {
		if strings.EqualFold(l.From, from) && !l.Notice && (channel == "" && !strings.HasPrefix(l.To, "#") || strings.EqualFold(l.To, channel)) {
			out = append(out, l.Text)
		}
	}
	return out
}

// Notices are the NOTICEs from sent the person.
func (p *Person) Notices(from string) []string {
	var out []string
	for _, l := range p.Heard.All() {
		if strings.EqualFold(l.From, from) && l.Notice {
			out = append(out, l.Text)
		}
	}
	return out
}

// WaitNotice waits for a NOTICE from from that contains part.
func (p *Person) WaitNotice(t testing.TB, from, part string) {
	t.Helper()
	bridgetest.WaitFor(t, fmt.Sprintf("a notice from %s with %q", from, part), &p.Heard.Signal, func() bool {
		for _, n := range p.Notices(from) {
			if strings.Contains(n, part) {
				return true
			}
		}
		return false
	})
}

// Quit leaves the network.
func (p *Person) Quit() {
	p.send("QUIT :bye")
	p.c.SetDeadline(time.Now().Add(time.Second))
	<-p.done
	p.c.Close()
}
