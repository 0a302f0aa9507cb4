package telegram

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"loadout/bridge/telegram/telegramtest"
)

func TestHTML(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain <text> & more", "plain &lt;text&gt; &amp; more"},
		{"**bold** and __bold__", "<b>bold</b> and <b>bold</b>"},
		{"*it* and _it_", "<i>it</i> and <i>it</i>"},
		{"~~gone~~", "<s>gone</s>"},
		{"use `a<b>` here", "use <code>a&lt;b&gt;</code> here"},
		{"snake_case_name stays", "snake_case_name stays"},
		{"2 * 3 * 4", "2 * 3 * 4"},
		{"**unclosed bold", "**unclosed bold"},
		{"**bold with *italic* inside**", "<b>bold with <i>italic</i> inside</b>"},
		{"[site](https://a.example/?x=1&y=\"2\")", `<a href="https://a.example/?x=1&amp;y=&#34;2&#34;">site</a>`},
		{"[bad](javascript:alert(1))", "[bad](javascript:alert(1))"},
		{"# Title", "<b>Title</b>"},
		{"- one\n* two\n  + nested", "• one\n• two\n  • nested"},
		{"1. first\n2. second", "1. first\n2. second"},
		{"---", "---"},
		{"```python\nif a < b:\n    print('**x**')\n```", "<pre><code class=\"language-python\">if a &lt; b:\n    print(&#39;**x**&#39;)</code></pre>"},
		{"```\nno lang\n```", "<pre>no lang</pre>"},
		{"```\nunclosed", "<pre>unclosed</pre>"},
		{`\*not italic\*`, "*not italic*"},
	}
	for _, c := range cases {
		got := HTML(c.in)
		if got != c.want {
			t.Errorf("HTML(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if _, err := telegramtest.CheckHTML(got); err != nil {
			t.Errorf("HTML(%q) = %q is not valid Telegram HTML: %v", c.in, got, err)
		}
	}
}

func TestHTMLAlwaysWellFormed(t *testing.T) {
	inputs := []string{
		"***", "**a *b** c*", "_a __b_ c__", "[a](https://x) ](", "`", "``", "a ** b ** c",
		"~~~", "*a\nb*", "[**x**](https://e.org)", "[`c`](https://e.org)", "& &amp; <>",
		"**[x](https://e.org)**", "_*_*_", "> quote", "|a|b|\n|-|-|",
	}
	for _, in := range inputs {
		if _, err := telegramtest.CheckHTML(HTML(in)); err != nil {
			t.Errorf("HTML(%q) = %q: %v", in, HTML(in), err)
		}
	}
}

func TestChunksCountUTF16(t *testing.T) {
	// Each emoji is one rune but two UTF-16 units, as Telegram counts.
	text := strings.Repeat("😀", 3000)
	parts := Chunks(text, MaxMessage)
	if len(parts) < 2 {
		t.Fatalf("got %d parts, want at least 2", len(parts))
	}
	total := 0
	for _, p := range parts {
		n := len(utf16.Encode([]rune(p)))
		if n > MaxMessage {
			t.Fatalf("part of %d UTF-16 units exceeds %d", n, MaxMessage)
		}
		total += len([]rune(p))
	}
	if total != 3000 {
		t.Fatalf("parts hold %d emoji, want 3000", total)
	}
}

// Whatever the model writes, the HTML is well-formed and no text is lost
// to an unclosed tag.
func FuzzHTML(f *testing.F) {
	for _, seed := range []string{"**a *b** c*", "_*_*_", "[**x**](https://e.org)", "``a ` b``", "[a](https://x) ](", "*" + strings.Repeat("_*", 20)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			return
		}
		out := HTML(md)
		if _, err := telegramtest.CheckHTML(out); err != nil {
			t.Fatalf("HTML(%q) = %q: %v", md, out, err)
		}
	})
}
