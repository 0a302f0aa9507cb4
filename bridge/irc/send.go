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
// Markdown flattened to plain text (see flatten), each line cut on word
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
	// A part is one line, but for a sentence of the pipeline's added to
	// it (how to answer a question): reflowed with it.
	lines := wrapLines(strings.Join(strings.Fields(clean(strings.ReplaceAll(part, "\n", " "))), " "), a.budget(r.To))
	var c *conn
	for try := 0; ; try++ {
		if c, err = a.current(ctx, c); err != nil {
			return err
		}
		to := r.To
		if r.Account != "" {
			if to, err = a.verify(ctx, c, r); err != nil {
				return err
			}
		}
		for len(lines) > 0 {
			if err = c.write(ctx, "PRIVMSG "+to+" :"+lines[0]); err != nil {
				break
			}
			lines = lines[1:]
		}
		if err == nil || ctx.Err() != nil || try == 2 {
			return err
		}
		// The connection failed: Run connects again, and the lines left
		// go out on the new one.
		a.log.Warn("irc: a line could not be sent; trying again once connected", "err", err)
	}
}

// verifyFor is how long a WHOIS that found a private route's nick
// signed in to its account holds, unless the bot sees the nick change,
// quit or sign out first.
const verifyFor = 30 * time.Second

// verify returns the nick a private route's lines go to: its nick, or
// the one its account was last heard under, once the server says that
// nick is signed in to the route's account now.
func (a *Adapter) verify(ctx context.Context, c *conn, r route) (string, error) {
	a.mu.Lock()
	latest := a.nicks[r.Account]
	a.mu.Unlock()
	for _, nick := range []string{r.To, latest} {
		if nick == "" || nick != r.To && fold(nick) == fold(r.To) {
			continue
		}
		n := fold(nick)
		a.mu.Lock()
		at, ok := a.verified[n]
		a.mu.Unlock()
		if ok && time.Since(at) < verifyFor {
			return nick, nil
		}
		acct, err := c.accountOf(ctx, nick)
		if err != nil {
			return "", err
		}
		if fold(acct) == r.Account {
			a.mu.Lock()
			a.verified[n] = time.Now()
			a.mu.Unlock()
			return nick, nil
		}
	}
	a.log.Warn("irc: a private answer is not sent: no nick is signed in to the person's account now", "nick", r.To, "account", r.Account)
	return "", fmt.Errorf("irc: %s is not signed in to the account %s now", r.To, r.Account)
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
	mdFence    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^\\s*(```|~~~)") })
	mdHeading  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`) })
	mdBullet   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[*+]\s+`) })
	mdRule     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([-*_])(\s*[-*_]){2,}\s*$`) })
	mdImage    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`!\[([^\]\n]*)\]\(([^)\s]+)\)`) })
	mdLink     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]\n]+)\]\(([^)\s]+)\)`) })
	mdStrong   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\*\*\*|\*\*|__|~~)([^\n]+?)(\*\*\*|\*\*|__|~~)`) })
	mdEm       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s(])[*_]([^*_\s](?:[^*_\n]*[^*_\s])?)[*_]`) })
	mdCode     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("`([^`\n]+)`") })
	mdNumbered = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d{1,3}[.)]\s`) })
)

// flatten turns the Markdown a model writes into the lines of plain
// text IRC shows: prose reflowed into one line (IRC shows each line as
// a message of its own, and paced lines are dear), with a line of their
// own for each heading, list item, quote, rule and line of code; links
// as "text (url)", and emphasis and code marks taken off. Its cost is
// linear in the length of md.
func flatten(md string) string {
	var out []string
	var cur []string
	block := false // cur is a heading, list item or quote: a blank line ends it
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
		}
		cur, block = nil, false
	}
	code := false
	for _, l := range strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n") {
		if mdFence().MatchString(l) {
			flush()
			code = !code
			continue
		}
		if code {
			if strings.TrimSpace(l) != "" {
				out = append(out, l)
			}
			continue
		}
		if strings.TrimSpace(l) == "" {
			if block {
				flush()
			}
			continue
		}
		heading := mdHeading().MatchString(l)
		switch {
		case mdRule().MatchString(l):
			flush()
			out = append(out, "----")
			continue
		case heading:
			l = mdHeading().ReplaceAllString(l, "$1")
		}
		l = inline(mdBullet().ReplaceAllString(l, "$1- "))
		t := strings.TrimSpace(l)
		if heading || strings.HasPrefix(t, "- ") || strings.HasPrefix(t, ">") || mdNumbered().MatchString(t) {
			flush()
			block = true
			if heading {
				out = append(out, t)
				block = false
				continue
			}
		}
		cur = append(cur, t)
	}
	flush()
	return strings.Join(out, "\n")
}

// inline takes the Markdown marks off a line's spans.
func inline(l string) string {
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
	return mdCode().ReplaceAllString(l, "$1")
}
