package bridge_test

import (
	"strings"
	"testing"

	"loadout/bridge"
)

// TestMarkupConvert converts with a style that sets every field and with
// the zero style, so each field is seen to change what it says and
// nothing else.
func TestMarkupConvert(t *testing.T) {
	full := bridge.Markup{
		Rule:        "RULE",
		Bullet:      "• ",
		DashBullets: true,
		Quotes:      true,
		Escape:      strings.NewReplacer("&", "&amp;").Replace,
		Link:        func(text, url string) string { return "<" + url + "|" + text + ">" },
		LinkAside:   true,
	}
	inline := full
	inline.LinkAside = false
	noDash := full
	noDash.DashBullets = false
	var zero bridge.Markup

	for _, c := range []struct {
		name  string
		style bridge.Markup
		in    string
		want  string
	}{
		{"emphasis", zero, "**b** *i* ~~s~~ ***bi*** __u__", "*b* _i_ ~s~ *_bi_* *u*"},
		{"heading", zero, "## Title **x** ##", "*Title x*"},
		{"empty heading", zero, "# **", ""},
		{"rule", full, "- - -", "RULE"},
		{"rule zero", zero, "***", ""},
		{"bullets", full, "* a\n  + b & c\n- d", "• a\n  • b &amp; c\n• d"},
		{"dash bullets kept", noDash, "- **d**\n* e", "- *d*\n• e"},
		{"no bullet", zero, "* a", "* a"},
		{"quote", full, "> # h\n> **q**", "> *h*\n> *q*"},
		{"quote as prose", zero, "> # h", "> # h"},
		{"link aside", full, "[a & b](http://h/**x**)", "<http://h/**x**|a &amp; b>"},
		{"link inline", inline, "[a](http://h/**x**)", "<http://h/*x*|a>"},
		{"link kept", zero, "[a](http://h/**x**)", "[a](http://h/*x*)"},
		{"code span", full, "`**x** & y` and **z**", "`**x** &amp; y` and *z*"},
		{"unclosed code span", zero, "`**x**", "`*x*"},
		{"code block", full, "```go\n**x** & y\n  ```\n**z**", "```\n**x** &amp; y\n```\n*z*"},
		{"one-line code block", full, "  ```a & **b**```", "```a &amp; **b**```"},
		{"open code block", zero, "```\n**x**", "```\n**x**\n```"},
		{"marks taken out", zero, "a\x01b\x04c\x05d", "abcd"},
		{"link marks taken out when used", full, "a\x02b\x03c", "abc"},
		{"link marks kept when unused", inline, "a\x02b\x03c", "a\x02b\x03c"},
	} {
		if got := c.style.Convert(c.in); got != c.want {
			t.Errorf("%s: Convert(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}
