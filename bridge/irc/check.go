package irc

import (
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"loadout/config"
)

// Check checks the irc section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	host, port, err := net.SplitHostPort(c.Server)
	if n, perr := strconv.Atoi(port); c.Server == "" || err != nil || host == "" || perr != nil || n <= 0 || n > 65535 {
		ch.Bad("server", "must be the server's host:port, such as irc.libera.chat:6697, got %q", c.Server)
	}
	if !validNick(c.Nick) {
		ch.Bad("nick", "must be the bot's nick (letters, digits, -_[]{}\\|^`, not starting with a digit or -), got %q", c.Nick)
	}
	if c.Account != "" && !validNick(c.Account) {
		ch.Bad("account", "must be a services account name, got %q", c.Account)
	}
	if !c.tls() {
		if c.CAFile != "" {
			ch.Bad("ca_file", "is for TLS, and irc.tls is false")
		}
		if c.Password != "" && !loopback(host) {
			ch.Bad("tls", "must be true when irc.password is set and irc.server is not on this machine: the password would cross the network in clear")
		}
	}
	if c.CAFile != "" {
		if _, err := os.Stat(c.CAFile); err != nil {
			ch.Bad("ca_file", "cannot be read: %v", err)
		}
	}
	for _, name := range c.Channels {
		if !isChannel(name) || strings.ContainsAny(name, " ,\x07") {
			ch.Bad("channels", "must list channel names such as #team, got %q", name)
		}
	}
	for name := range c.ChannelKeys {
		found := false
		for _, j := range c.Channels {
			found = found || fold(j) == fold(name)
		}
		if !found {
			ch.Bad("channel_keys", "names %q, which is not in irc.channels", name)
		}
	}
	for _, n := range c.AllowedNicks {
		if !validNick(strings.TrimSpace(n)) {
			ch.Bad("allowed_nicks", "must list services account names such as ana, got %q", n)
		}
	}
	ch.AtLeast("burst", c.Burst, 1)
	if c.LineEvery > 0 && c.LineEvery < 10*time.Millisecond {
		ch.Bad("line_every", "must be at least 10ms (or negative: no pacing), got %s", c.LineEvery)
	}
	ch.AtLeast("max_answer", c.MaxAnswer, lineMax)
	ch.AtLeast("workers", c.Workers, 1)
	ch.Duration("max_backoff", c.MaxBackoff, time.Second)
}

// validNick reports whether s can be a nick or account name.
func validNick(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nickChar(s[i]) {
			return false
		}
	}
	return true
}

// loopback reports whether host is this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
