package irc

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// lineMax is the longest IRC line, CRLF included (RFC 1459, and the
// LINELEN servers announce); tags do not count.
const lineMax = 512

// Split cuts an answer into the lines the bot sends, one part each:
// Markdown flattened to plain text, each line of the text cut on word
// boundaries into lines that fit the 512-byte limit once the server has
// put the bot's prefix and the PRIVMSG before them, never inside a
// UTF-8 character. One part per line: a restart resends no line that
// went out.
func (a *Adapter) Split(text string) []string {
	return wrapLines(flatten(text), a.budget(""))
}

// budget is how many bytes of text fit in one PRIVMSG line to target
// ("": the longest target the bot may answer), as the server relays
// it: ":nick!user@host PRIVMSG target :text\r\n".
func (a *Adapter) budget(target string) int {
	a.mu.Lock()
	c := a.conn
	a.mu.Unlock()
	nickLen, chanLen, prefix := 30, 64, ""
	if c != nil {
		nickLen, chanLen, prefix = c.nickLen, c.chanLen, c.prefix
	}
	if prefix == "" {
		// The longest the server may show: nick, ~user (10), host (63).
		prefix = strings.Repeat("x", max(nickLen, len(a.cfg.Nick)+5)+1+11+1+63)
	}
	if target == "" {
		target = strings.Repeat("x", max(chanLen, nickLen))
	}
	return lineMax - len(":"+prefix+" PRIVMSG "+target+" :\r\n")
}

// Send sends one part to the route: a line (a longer part is wrapped
// again). A private route's nick must still be signed in to the route's
// account, or the part waits: a nick left by its person can be taken by
// anyone.
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	c, err := a.current(ctx)
	if err != nil {
		return err
	}
	if r.Account != "" {
		if err := a.verify(ctx, c, r); err != nil {
			return err
		}
	}
	for _, line := range wrapLines(part, a.budget(r.To)) {
		if err := c.write(ctx, "PRIVMSG "+r.To+" :"+line); err != nil {
			return err
		}
	}
	return nil
}

// verifyFor is how long a WHOIS that found a private route's nick
// signed in to its account holds, unless the bot sees the nick change,
// quit or sign out first.
const verifyFor = 30 * time.Second

// verify checks that r.To is signed in to r.Account now.
func (a *Adapter) verify(ctx context.Context, c *conn, r route) error {
	n := fold(r.To)
	a.mu.Lock()
	at, ok := a.verified[n]
	a.mu.Unlock()
	if ok && time.Since(at) < verifyFor {
		return nil
	}
	acct, err := c.accountOf(ctx, r.To)
	if err != nil {
		return err
	}
	if fold(acct) != r.Account {
		a.log.Warn("irc: a private answer waits: its nick is not signed in to the person's account now", "nick", r.To, "account", r.Account)
		return fmt.Errorf("irc: %s is not signed in to the account %s now", r.To, r.Account)
	}
	a.mu.Lock()
	a.verified[n] = time.Now()
	a.mu.Unlock()
	return nil
}

// wrapLines cuts text into lines of at most limit bytes: at its line
// breaks, then between words, and inside a word only when one word is
// longer than a line, never inside a UTF-8 character. Empty lines are
// dropped. Its cost is linear in the length of text.
func wrapLines(text string, limit int) []string {
	limit = max(limit, 16)
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(clean(line))
		for len(line) > limit {
			cut := strings.LastIndexByte(line[:limit+1], ' ')
			if cut <= 0 {
				cut = limit
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
			}
			if s := strings.TrimSpace(line[:cut]); s != "" {
				out = append(out, s)
			}
			line = strings.TrimSpace(line[cut:])
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// The patterns of flatten, compiled at first use.
var (
	mdFence   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^\\s*(```|~~~)") })
	mdHeading = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`) })
	mdBullet  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[*+]\s+`) })
	mdRule    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([-*_])(\s*[-*_]){2,}\s*$`) })
	mdImage   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`!\[([^\]\n]*)\]\(([^)\s]+)\)`) })
	mdLink    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]\n]+)\]\(([^)\s]+)\)`) })
	mdStrong  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\*\*\*|\*\*|__|~~)([^\n]+?)(\*\*\*|\*\*|__|~~)`) })
	mdEm      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s(])[*_]([^*_\s](?:[^*_\n]*[^*_\s])?)[*_]`) })
	mdCode    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("`([^`\n]+)`") })
)

// flatten turns the Markdown a model writes into plain text for IRC:
// code fences dropped (their lines kept as they are), headings as plain
// lines, bullets as "- ", links as "text (url)", and emphasis and code
// marks taken off. Its cost is linear in the length of md.
func flatten(md string) string {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	out := make([]string, 0, len(lines))
	code := false
	for _, l := range lines {
		if mdFence().MatchString(l) {
			code = !code
			continue
		}
		if code {
			out = append(out, l)
			continue
		}
		switch {
		case mdRule().MatchString(l):
			out = append(out, "----")
			continue
		case mdHeading().MatchString(l):
			l = mdHeading().ReplaceAllString(l, "$1")
		}
		l = mdBullet().ReplaceAllString(l, "$1- ")
		l = mdImage().ReplaceAllString(l, "$1 ($2)")
		l = mdLink().ReplaceAllStringFunc(l, func(s string) string {
			m := mdLink().FindStringSubmatch(s)
			if m[1] == m[2] {
				return m[2]
			}
			return m[1] + " (" + m[2] + ")"
		})
		l = mdStrong().ReplaceAllString(l, "$2")
		l = mdEm().ReplaceAllString(l, "$1$2")
		l = mdCode().ReplaceAllString(l, "$1")
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
