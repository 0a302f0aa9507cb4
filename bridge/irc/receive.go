package irc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/chat"
)

// pingAfter is how long the connection may be silent before the bot
// pings the server; pongWait how long it then waits for any line.
const (
	pingAfter = 3 * time.Minute
	pongWait  = time.Minute
	// regainEvery is how often the bot asks for its nick back.
	regainEvery = 5 * time.Second
)

// read handles the server's lines until the connection fails or ctx
// ends. A silent server is pinged, then given up.
func (a *Adapter) read(ctx context.Context, c *conn) error {
	pinged := false
	regain := time.Now().Add(regainEvery)
	for {
		if c.nick != a.cfg.Nick && time.Now().After(regain) {
			// Registered as nick_, the nick being taken (by the bot's
			// own connection before a crash, often): take it back.
			regain = time.Now().Add(regainEvery)
			if err := c.raw("NICK " + a.cfg.Nick); err != nil {
				return err
			}
		}
		if pinged {
			c.nc.SetReadDeadline(time.Now().Add(pongWait))
		} else if c.nick != a.cfg.Nick {
			c.nc.SetReadDeadline(time.Now().Add(regainEvery))
		} else {
			c.nc.SetReadDeadline(time.Now().Add(pingAfter))
		}
		if ctx.Err() != nil {
			return nil
		}
		m, err := c.read()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !pinged && ctx.Err() == nil {
			pinged = true
			if err := c.raw("PING :loadout"); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		pinged = false
		if err := a.handle(ctx, c, m); err != nil {
			return err
		}
	}
}

// handle takes one line of the server's.
func (a *Adapter) handle(ctx context.Context, c *conn, m message) error {
	switch m.command {
	case "PING":
		return c.raw("PONG :" + m.param(0))
	case "ERROR":
		return errors.New("irc: the server closed the connection: " + m.param(0))
	case "PRIVMSG":
		return a.privmsg(ctx, c, m)
	case "JOIN":
		// extended-join: JOIN #channel account :real name ("*": none).
		if len(m.params) >= 2 {
			a.heard(m.nick(), m.param(1))
		}
	case "ACCOUNT":
		a.heard(m.nick(), m.param(0))
	case "NICK":
		if fold(m.nick()) == fold(c.nick) {
			a.mu.Lock()
			c.nick = m.param(0)
			a.mu.Unlock()
			a.log.Info("irc: the bot's nick is now its own", "nick", c.nick)
		}
		a.renamed(m.nick(), m.param(0))
	case "QUIT":
		a.heard(m.nick(), "*")
	case "330", "318", "401":
		c.whoisReply(m)
	case "KICK":
		if fold(m.param(1)) == fold(c.nick) {
			a.log.Warn("irc: the bot was kicked from a channel; joining again", "channel", m.param(0), "by", m.nick())
			for _, l := range joins([]string{m.param(0)}, a.cfg.ChannelKeys) {
				c.courtesy(l)
			}
		}
	case "475", "473", "474", "471", "403":
		a.log.Warn("irc: cannot join a channel", "channel", m.param(1), "why", m.params[len(m.params)-1])
	}
	return nil
}

// heard records that nick is signed in to account ("*" or "0": to none).
func (a *Adapter) heard(nick, account string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := fold(nick)
	delete(a.verified, n)
	if account == "*" || account == "0" || account == "" {
		delete(a.accounts, n)
		return
	}
	a.accounts[n] = account
	a.nicks[fold(account)] = nick
}

// renamed follows a nick change.
func (a *Adapter) renamed(from, to string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := fold(from)
	delete(a.verified, f)
	if acct, ok := a.accounts[f]; ok {
		delete(a.accounts, f)
		a.accounts[fold(to)] = acct
		a.nicks[fold(acct)] = to
	}
}

// accountOf is the account the sender of m is signed in to, "" when
// none: with account-tag, what the server tagged the message with (no
// tag: none); without it, what extended-join and account-notify said.
func (a *Adapter) accountOf(c *conn, m message) string {
	if c.caps["account-tag"] {
		return m.tags["account"]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.accounts[fold(m.nick())]
}

// privmsg hands a message for the bot to the pipeline: every private
// message, and in channels the lines that address it ("loadout: …",
// "loadout, …", or any line with its nick). Someone not signed in to an
// allowed account is told once, privately, and nothing of theirs is
// stored.
func (a *Adapter) privmsg(ctx context.Context, c *conn, m message) error {
	from, target, text := m.nick(), m.param(0), m.param(1)
	if from == "" || fold(from) == fold(c.nick) || strings.Contains(from, ".") && !strings.Contains(m.source, "@") {
		return nil // the bot itself, a server
	}
	if strings.HasPrefix(text, "\x01") {
		return nil // CTCP (ACTION, VERSION …)
	}
	if t, err := time.Parse(time.RFC3339Nano, m.tags["time"]); err == nil && t.Before(c.since.Add(-time.Second)) {
		// A channel's history, played back as the bot joined: who said
		// it is not known now (no account tag), and it was not said to
		// this process.
		return nil
	}
	text = strings.TrimSpace(stripFormatting(text))
	private := !isChannel(target)
	if !private {
		var ok bool
		if text, ok = addressed(text, c.nick); !ok {
			return nil
		}
	}
	if text == "" {
		return nil
	}
	account := a.accountOf(c, m)
	if account == "" || !a.allowed[fold(account)] {
		a.refuse(c, from, account, target)
		return nil
	}
	acct := fold(account)
	a.mu.Lock()
	a.nicks[acct] = from
	a.mu.Unlock()
	key, r := "irc:"+acct, route{To: from, Account: acct}
	if !private {
		key, r = "irc:"+fold(target), route{To: target}
	}
	ref := "line:" + newRef()
	if id := m.tags["msgid"]; id != "" {
		ref = "msgid:" + id
	}
	_, err := a.pipe.Receive(ctx, ref, func() bridge.Pending {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode()}
	}, func() (bridge.Pending, bool) {
		return bridge.Pending{
			Inbound: chat.Inbound{ChatKey: key, UserKey: "irc:" + acct, Text: a.command(text)},
			Route:   r.encode(),
		}, true
	})
	if errors.Is(err, bridge.ErrStopped) {
		return nil
	}
	if err != nil {
		// IRC delivers nothing again: the person is told it was lost.
		a.log.Error("irc: a message could not be stored; its sender is told to send it again", "nick", from, "err", err)
		c.courtesy("NOTICE " + from + " :" + textNotStored)
	}
	return nil
}

// textNotStored tells a person their message was lost.
const textNotStored = "Sorry, I could not take your last message just now. Please send it again."

// maxRefused bounds the nicks remembered as told they are refused.
const maxRefused = 10000

// refuse logs a message from someone not allowed, and tells them once
// (per nick, while the process runs), by a private notice, which is
// never stored.
func (a *Adapter) refuse(c *conn, nick, account, where string) {
	if account == "" {
		a.log.Warn("irc: refused a message from a nick not signed in to a services account: people count by their account; the nick alone proves nothing",
			"nick", nick, "to", where)
	} else {
		a.log.Warn("irc user refused: add their account to irc.allowed_nicks to allow them", "nick", nick, "account", account, "to", where)
	}
	a.mu.Lock()
	first := !a.refused[fold(nick)]
	if len(a.refused) >= maxRefused {
		clear(a.refused) // strangers changing nicks to grow it: told again
	}
	a.refused[fold(nick)] = true
	a.mu.Unlock()
	if first {
		c.courtesy("NOTICE " + nick + " :" + bridge.TextRefused)
	}
}

// addressed reports whether a channel line is for the bot: it starts
// with the bot's nick and ":" or ",", which is taken off, or holds the
// nick as a word.
func addressed(text, nick string) (string, bool) {
	n := fold(nick)
	if len(text) > len(nick) && fold(text[:len(nick)]) == n {
		switch text[len(nick)] {
		case ':', ',':
			return strings.TrimSpace(text[len(nick)+1:]), true
		}
	}
	ft := fold(text)
	for i := 0; ; {
		j := strings.Index(ft[i:], n)
		if j < 0 {
			return text, false
		}
		j += i
		end := j + len(n)
		if (j == 0 || !nickChar(ft[j-1])) && (end == len(ft) || !nickChar(ft[end])) {
			return text, true
		}
		i = j + 1
	}
}

// nickChar reports whether b may be part of a nick.
func nickChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-_[]{}\\|^`", b) >= 0
}

// command turns "!approve #k7f2", how a command is typed where the IRC
// client keeps a leading "/" for its own commands, into the command
// "/approve #k7f2", for the commands the router knows.
func (a *Adapter) command(text string) string {
	if !strings.HasPrefix(text, "!") || a.router == nil {
		return text
	}
	name, _, _ := strings.Cut(text[1:], " ")
	for _, c := range a.router.Commands() {
		if strings.EqualFold(c.Name, name) {
			return "/" + text[1:]
		}
	}
	return text
}

// stripFormatting drops mIRC formatting codes: bold, italic, underline,
// strike, monospace, reverse, reset, and colours with their numbers.
func stripFormatting(s string) string {
	if !strings.ContainsAny(s, "\x02\x03\x04\x0f\x11\x16\x1d\x1e\x1f") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\x02', '\x0f', '\x11', '\x16', '\x1d', '\x1e', '\x1f':
		case '\x03':
			i = skipColour(s, i, 2, isDigit)
		case '\x04':
			i = skipColour(s, i, 6, isHex)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// skipColour skips a colour code's "fg[,bg]" after position i, each at
// most n characters that ok accepts, and returns the last position used.
func skipColour(s string, i, n int, ok func(byte) bool) int {
	j := i + 1
	for k := 0; k < n && j < len(s) && ok(s[j]); k++ {
		j++
	}
	if j > i+1 && j+1 < len(s) && s[j] == ',' && ok(s[j+1]) {
		j++
		for k := 0; k < n && j < len(s) && ok(s[j]); k++ {
			j++
		}
	}
	return j - 1
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
func isHex(b byte) bool   { return isDigit(b) || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' }

// newRef names a line the server gave no id.
func newRef() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
