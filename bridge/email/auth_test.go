package email

import (
	"strings"
	"testing"
)

// Only the topmost Authentication-Results header counts (the receiving
// server puts its own above those the message came with), and only when
// it is of the trusted authserv-id; its dmarc=pass counts only with a
// header.from that is the From domain (in any case, an internationalised
// name in either form). The headers are read as a message carries them,
// topmost first.
func TestSenderAuthenticationReadsOnlyTheTopmostHeader(t *testing.T) {
	const own = "mx.example.org"
	for _, c := range []struct {
		name, from string
		headers    []string // Authentication-Results, topmost first
		ok         bool
		why        string
	}{
		{"dmarc pass", "ana@example.org", []string{own + "; dmarc=pass header.from=example.org"}, true, ""},
		{"dmarc pass, domain in another case", "ana@Example.ORG", []string{own + "; dmarc=pass header.from=EXAMPLE.org."}, true, ""},
		{"dmarc pass, internationalised domain", "ana@bücher.example", []string{own + "; dmarc=pass header.from=xn--bcher-kva.example"}, true, ""},
		{"aligned dkim pass", "ana@example.org", []string{own + "; dkim=pass header.d=mail.example.org; dmarc=none"}, true, ""},
		{"dmarc pass without header.from", "ana@example.org", []string{own + "; dmarc=pass"}, false, "for no domain"},
		{"dmarc pass for another domain", "ana@example.org", []string{own + "; dmarc=pass header.from=evil.example"}, false, "for another domain (header.from=evil.example)"},
		{"dmarc pass for the From's parent", "ana@mail.example.org", []string{own + "; dmarc=pass header.from=example.org"}, false, "for another domain"},
		{"a forged pass below the server's verdict", "ana@example.org",
			[]string{own + "; dkim=none; dmarc=none header.from=example.org", own + "; dmarc=pass header.from=example.org; dkim=pass header.d=example.org"}, false, "show no dmarc=pass"},
		{"a forged pass below the server's fail", "ana@example.org",
			[]string{own + "; dmarc=fail header.from=example.org", own + "; dmarc=pass header.from=example.org"}, false, "dmarc=fail"},
		{"the trusted id below another server's header", "ana@example.org",
			[]string{"mx2.example.net; dmarc=none", own + "; dmarc=pass header.from=example.org"}, false, "the topmost Authentication-Results header is not of " + own},
		{"no header", "ana@example.org", nil, false, "no Authentication-Results header"},
	} {
		var raw strings.Builder
		for _, h := range c.headers {
			raw.WriteString("Authentication-Results: " + h + "\r\n")
		}
		raw.WriteString("From: <" + c.from + ">\r\nSubject: hi\r\n\r\nhello\r\n")
		l, _, err := readHeader([]byte(raw.String()))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ok, why := authenticated(l.header, c.from, own)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%s: authenticated = %v, %q", c.name, ok, why)
		}
	}
}
