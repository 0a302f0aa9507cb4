package slack

import "testing"

func TestMrkdwn(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"bold", "a **b** c", "a *b* c"},
		{"bold underscores", "a __b__ c", "a *b* c"},
		{"italic", "a *b* c", "a _b_ c"},
		{"italic underscores stay", "a _b_ c", "a _b_ c"},
		{"bold italic", "***x***", "*_x_*"},
		{"bold and italic", "**bold** and *it*", "*bold* and _it_"},
		{"strike", "~~gone~~", "~gone~"},
		{"link", "see [the docs](https://example.com/x_y?a=1&b=2)", "see <https://example.com/x_y?a=1&amp;b=2|the docs>"},
		{"escape", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"inline code untouched", "run `x **y** <z>` now", "run `x **y** &lt;z&gt;` now"},
		{"heading", "## Plan **today**", "*Plan today*"},
		{"bullets", "- one\n* two\n  + nested", "• one\n• two\n  • nested"},
		{"numbered list", "1. one\n2. **two**", "1. one\n2. *two*"},
		{"quote", "> quoted **text**", "> quoted *text*"},
		{"rule", "---", "──────────"},
		{"code block", "```go\nx := a**2 // *not italic*\nif a < b {}\n```", "```\nx := a**2 // *not italic*\nif a &lt; b {}\n```"},
		{"unclosed code block", "```\ncode", "```\ncode\n```"},
		{"one-line code block", "```echo hi```", "```echo hi```"},
		{"multiplication is not italic", "2 * 3 * 4", "2 * 3 * 4"},
		{"snake_case stays", "use snake_case_names", "use snake_case_names"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Mrkdwn(c.in); got != c.want {
				t.Errorf("Mrkdwn(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

func TestPlainText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"<@UBOT> hello", "hello"},
		{"<@UBOT>   /clear", "/clear"},
		{"ask <@U2|ana> about it", "ask @ana about it"},
		{"ask <@U2> about it", "ask @U2 about it"},
		{"in <#C1|general>", "in #general"},
		{"see <https://example.com|the site>", "see the site (https://example.com)"},
		{"see <https://example.com>", "see https://example.com"},
		{"mail <mailto:a@b.c|a@b.c>", "mail a@b.c"},
		{"<!here> x", "@here x"},
		{"a &lt; b &amp;&amp; c &gt; d", "a < b && c > d"},
		{"line one\nline two", "line one\nline two"},
	}
	for _, c := range cases {
		if got := PlainText(c.in, "UBOT"); got != c.want {
			t.Errorf("PlainText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Text that holds the converter's own placeholder bytes (a model can
// echo anything) is converted without panicking.
func TestMrkdwnPlaceholderBytesInInput(t *testing.T) {
	for _, in := range []string{"a \x020\x03 b", "\x027\x03", "`x` \x040\x05", "\x01bold\x01"} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Mrkdwn(%q) panicked: %v", in, p)
				}
			}()
			Mrkdwn(in)
		}()
	}
}
