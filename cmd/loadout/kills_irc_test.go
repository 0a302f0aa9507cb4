package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
	"loadout/bridge/irc/irctest"
)

// killedIRC is the IRC channel on a real network (InspIRCd with Anope),
// each chat a person signed in to their account writing to the bot
// privately. IRC keeps nothing for a client that is not connected: a
// line to the bot's nick while it is down is refused with "no such
// nick", and the person sends it again, as people do. A line the server
// handed to the bot just as it was killed, before it was stored, is
// lost by IRC itself; the person, unanswered, says it again before
// going on (docs/irc.md: what IRC does not do).
func killedIRC(t testing.TB) bridgetest.Killed {
	var sh irctest.Shared
	n := sh.Get(t)
	t.Cleanup(sh.Close)
	const pw = "kill-suite-password"
	n.Account(t, "loadout", pw)
	people := make([]*irctest.Person, bridgetest.KillChats)
	var nicks []string
	for c := range people {
		nick := fmt.Sprintf("k%d", c)
		n.Account(t, nick, pw)
		people[c] = n.Connect(t, nick, nick, pw)
		nicks = append(nicks, nick)
	}
	answers := func(c int) []string {
		var out []string
		for _, l := range people[c].Heard.All() {
			if strings.HasPrefix(l.From, "loadout") && !l.Notice {
				out = append(out, l.Text)
			}
		}
		return out
	}
	var pings atomic.Int64
	// deliver says text until the server hands it to the bot: a PING
	// after it answers once the server has dealt with the line, after
	// "no such nick" if the bot was not there.
	deliver := func(t testing.TB, c int, text string) {
		p := people[c]
		for {
			before := p.Heard.Len()
			token := fmt.Sprint(pings.Add(1))
			p.Say(t, "loadout", text)
			p.Raw("PING :" + token)
			var missed bool
			bridgetest.WaitFor(t, "the server's answer to a ping", &p.Heard.Signal, func() bool {
				for _, l := range p.Heard.All()[before:] {
					missed = missed || l.From == "401"
					if l.From == "PONG" && l.Text == token {
						return true
					}
				}
				return false
			})
			if !missed {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	last := make([]string, bridgetest.KillChats)
	return bridgetest.Killed{
		Config: fmt.Sprintf("irc:\n  enabled: true\n  server: %q\n  ca_file: %q\n  nick: loadout\n  password: %q\n  allowed_nicks: [%s]\n  line_every: -1s\n",
			n.TLS, n.CAFile, pw, strings.Join(nicks, ", ")),
		Send: func(t testing.TB, _ string, c int, text string) {
			if prev := last[c]; prev != "" {
				for again := time.Now().Add(10 * time.Second); !has(answers(c), "Answer to "+prev); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(again) {
						deliver(t, c, prev) // lost on its way in: said again
						again = time.Now().Add(10 * time.Second)
					}
				}
			}
			deliver(t, c, text)
			last[c] = text
		},
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			for c := range out {
				out[c] = answers(c)
			}
			return out
		},
	}
}

func has(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}
