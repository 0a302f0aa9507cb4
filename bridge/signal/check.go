package signal

import (
	"net/url"
	"strings"
	"time"

	"loadout/config"
)

// E164 is a phone number in E.164 form, "+" and its digits, with the
// spaces, dashes, dots and brackets people write it with taken out
// ("+1 (555) 123-4567" is "+15551234567"); a leading "00" is read as
// "+". It is "" when the number has no "+" or "00" before it, or what is
// left is not 7 to 15 digits.
func E164(number string) string {
	s := strings.TrimSpace(number)
	switch {
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	case strings.HasPrefix(s, "00"):
		s = s[2:]
	default:
		return ""
	}
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c == ' ', c == '-', c == '.', c == '(', c == ')':
		default:
			return ""
		}
	}
	d := b.String()
	if len(d) < 7 || len(d) > 15 || d[0] == '0' {
		return ""
	}
	return "+" + d
}

// isUUID reports whether s is a UUID in its usual form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range strings.ToLower(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Check checks the signal section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	if u, err := url.Parse(c.RPCURL); c.RPCURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		ch.Bad("rpc_url", "must be the http(s) address of signal-cli's daemon, such as http://127.0.0.1:8080, got %q", redactURL(c.RPCURL))
	}
	if E164(c.Account) == "" {
		ch.Bad("account", "must be the bot's number in international form, e.g. \"+15551234567\", got %q", c.Account)
	}
	for _, n := range c.AllowedNumbers {
		if E164(n) == "" {
			ch.Bad("allowed_numbers", "must hold phone numbers in international form, e.g. \"+15551234567\", got %q", n)
		}
	}
	for _, u := range c.AllowedUUIDs {
		if !isUUID(strings.TrimSpace(u)) {
			ch.Bad("allowed_uuids", "must hold Signal account ids such as \"a1b2c3d4-0000-4000-8000-123456789abc\" (the log shows a refused sender's), got %q", u)
		}
	}
	ch.Duration("poll_timeout", c.PollTimeout, time.Second)
	ch.Duration("typing_interval", c.TypingInterval, time.Second)
}

// redactURL is raw without the credentials it may carry.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unreadable)"
}
