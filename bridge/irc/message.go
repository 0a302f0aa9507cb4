package irc

import (
	"strings"
)

// message is one IRC line as read: its IRCv3 tags, its source and its
// command with parameters (the trailing one included).
type message struct {
	tags    map[string]string
	source  string
	command string
	params  []string
}

// maxLine is the longest line read: 8191 bytes of tags and 512 of the
// message itself (IRCv3 message-tags). A longer line is cut.
const maxLine = 8191 + 512

// parse reads one line (without its CRLF). ok is false for a line that
// is not a message (empty, or without a command). Its cost is linear in
// the line's length.
func parse(line string) (m message, ok bool) {
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "@") {
		var raw string
		raw, line, _ = strings.Cut(line[1:], " ")
		m.tags = parseTags(raw)
	}
	line = strings.TrimLeft(line, " ")
	if strings.HasPrefix(line, ":") {
		m.source, line, _ = strings.Cut(line[1:], " ")
	}
	for {
		line = strings.TrimLeft(line, " ")
		if line == "" {
			break
		}
		if line[0] == ':' && m.command != "" {
			m.params = append(m.params, line[1:])
			break
		}
		var word string
		word, line, _ = strings.Cut(line, " ")
		if m.command == "" {
			m.command = strings.ToUpper(word)
			continue
		}
		m.params = append(m.params, word)
	}
	return m, m.command != ""
}

// parseTags reads "a=b;c;d=e\sf" into a map, unescaping values.
func parseTags(raw string) map[string]string {
	tags := map[string]string{}
	for raw != "" {
		var tag string
		tag, raw, _ = strings.Cut(raw, ";")
		k, v, _ := strings.Cut(tag, "=")
		if k != "" {
			tags[k] = unescapeTag(v)
		}
	}
	return tags
}

func unescapeTag(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' {
			b.WriteByte(v[i])
			continue
		}
		i++
		if i == len(v) {
			break
		}
		switch v[i] {
		case ':':
			b.WriteByte(';')
		case 's':
			b.WriteByte(' ')
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		default:
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

// param is the i-th parameter, "" when there are fewer.
func (m message) param(i int) string {
	if i < len(m.params) {
		return m.params[i]
	}
	return ""
}

// nick is the nick of the message's source ("ana" of "ana!ana@host").
func (m message) nick() string {
	n, _, _ := strings.Cut(m.source, "!")
	return n
}

// fold casemaps s as rfc1459 does (the default of IRC servers, and of
// InspIRCd and Anope as set up here): ASCII letters, and []\~ as {}|^.
// Nicks, accounts and channel names are compared folded.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		case r == '[':
			return '{'
		case r == ']':
			return '}'
		case r == '\\':
			return '|'
		case r == '~':
			return '^'
		}
		return r
	}, s)
}

// isChannel reports whether target names a channel rather than a nick.
func isChannel(target string) bool {
	return target != "" && strings.ContainsRune("#&+!", rune(target[0]))
}

// clean drops from s what may not travel inside an IRC parameter: NUL,
// CR and LF.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == 0 || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
}
