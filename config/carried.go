package config

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// span is where, in a string, a credential it carries is written.
type span struct{ from, to int }

// forms are the credential at sp in s as written and, where it is
// escaped (a URL's %40, a quoted DSN value's \'), as meant.
func (sp span) forms(s string) []string {
	raw := s[sp.from:sp.to]
	out := []string{raw}
	for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape, unquote} {
		if v, err := unescape(raw); err == nil && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// unquote undoes the escapes of a quoted DSN value.
func unquote(s string) (string, error) {
	return strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\"`, `"`).Replace(s), nil
}

var (
	// urlRef is a URL inside a text, up to the first space or quote.
	urlRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]*`) })
	// pairRef is name=value outside a URL, the value bare (up to a
	// space) or quoted: a DSN's password=…, an argument --token=….
	pairRef = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^|\s)-*([A-Za-z_][\w.-]*)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|(\S+))`)
	})
	// flagRef is an argument that is a flag alone (--api-key), whose
	// value is the next argument.
	flagRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^--?([A-Za-z][\w.-]*)$`) })
)

// carried are, for each of items (a value, or a list of arguments), the
// spans of the credentials it carries (Carried).
func carried(items []string) [][]span {
	out := make([][]span, len(items))
	for i, s := range items {
		out[i] = credentialsIn(s)
		if i > 0 {
			if m := flagRef().FindStringSubmatch(items[i-1]); m != nil && credentialName(m[1]) && s != "" {
				out[i] = []span{{0, len(s)}}
			}
		}
	}
	return out
}

// credentialsIn are the spans of the credentials s carries: in each URL
// its user-info and its query parameters named like credentials, and
// outside URLs the values of name=value pairs so named.
func credentialsIn(s string) []span {
	var out []span
	urls := urlRef().FindAllStringIndex(s, -1)
	for _, u := range urls {
		out = append(out, inURL(s, u[0], u[1])...)
	}
	for _, m := range pairRef().FindAllStringSubmatchIndex(s, -1) {
		inside := slices.ContainsFunc(urls, func(u []int) bool { return m[0] < u[1] && u[0] < m[1] })
		if inside || !credentialName(s[m[2]:m[3]]) {
			continue
		}
		for g := 4; g < len(m); g += 2 {
			if m[g] >= 0 && m[g] < m[g+1] {
				out = append(out, span{m[g], m[g+1]})
			}
		}
	}
	slices.SortFunc(out, func(a, b span) int { return a.from - b.from })
	return out
}

// inURL are the credentials of the URL at s[from:to].
func inURL(s string, from, to int) []span {
	var out []span
	u := s[from:to]
	sep := strings.Index(u, "://")
	scheme := strings.ToLower(u[:sep])
	start := from + sep + 3
	authority := s[start:to]
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	if at := strings.LastIndex(authority, "@"); at > 0 {
		user, pass, hasPass := strings.Cut(authority[:at], ":")
		switch {
		case hasPass && pass != "":
			out = append(out, span{start + len(user) + 1, start + at})
		case !hasPass && slices.Contains([]string{"http", "https", "ws", "wss"}, scheme):
			out = append(out, span{start, start + at})
		}
	}
	q := strings.Index(u, "?")
	if q < 0 {
		return out
	}
	query := u[q+1:]
	if h := strings.Index(query, "#"); h >= 0 {
		query = query[:h]
	}
	at := from + q + 1
	for part := range strings.SplitSeq(query, "&") {
		name, value, ok := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if ok && value != "" && credentialName(name) {
			out = append(out, span{at + len(part) - len(value), at + len(part)})
		}
		at += len(part) + 1
	}
	return out
}

// credentialName reports whether a parameter's, a pair's or a flag's
// name says its value is a credential: token, secret, password, api_key,
// key, auth, sig and the like.
func credentialName(name string) bool {
	n := strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(strings.TrimLeft(name, "-")))
	for _, w := range []string{"token", "secret", "passw", "apikey", "api_key", "credential", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	for part := range strings.SplitSeq(n, "_") {
		switch part {
		case "key", "pwd", "pass", "auth", "sig":
			return true
		}
	}
	return false
}
