package irc

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"loadout/config"
)

func TestWrapLinesFitsTheLimitOnWordsAndRunes(t *testing.T) {
	text := strings.Repeat("héllo wörld ", 100) + strings.Repeat("ü", 300)
	lines := wrapLines(text, 100)
	if got := strings.Join(lines, ""); strings.ReplaceAll(got, " ", "") != strings.ReplaceAll(text, " ", "") {
		t.Fatal("text was lost or added")
	}
	for _, l := range lines {
		if len(l) > 100 || !utf8.ValidString(l) {
			t.Fatalf("line of %d bytes, valid %v: %q", len(l), utf8.ValidString(l), l)
		}
		if !strings.HasPrefix(l, "ü") && (strings.HasPrefix(l, "llo") || strings.HasSuffix(l, "hé")) {
			t.Fatalf("a word was cut: %q", l)
		}
	}
}

func TestSplitFitsARelayedLine(t *testing.T) {
	a := New(Config{Nick: "loadout"}, nil, nil)
	for _, part := range a.Split(strings.Repeat("word ", 2000)) {
		relayed := ":loadout_____!~loadout12@" + strings.Repeat("h", 63) + " PRIVMSG " + strings.Repeat("#", 64) + " :" + part + "\r\n"
		if len(relayed) > lineMax {
			t.Fatalf("a relayed line of %d bytes", len(relayed))
		}
	}
}

func TestFlattenMarkdown(t *testing.T) {
	md := "# Title\n\nSome **bold** and *italic* text,\nwith `code` and a [link](https://x.test).\n\n- one\n- two\n\n```go\nfmt.Println(1)\n```\n---\n> quoted"
	want := []string{"Title", "Some bold and italic text, with code and a link (https://x.test).", "- one", "- two", "fmt.Println(1)", "----", "> quoted"}
	if got := strings.Split(flatten(md), "\n"); !slices.Equal(got, want) {
		t.Fatalf("flatten:\n%q\nwant\n%q", got, want)
	}
}

func TestAddressed(t *testing.T) {
	for _, c := range []struct {
		in, out string
		ok      bool
	}{
		{"loadout: hi", "hi", true}, {"LOADOUT, hi", "hi", true}, {"so loadout what now", "so loadout what now", true},
		{"loadouts are fun", "", false}, {"hi all", "", false}, {"(loadout) x", "(loadout) x", true}, {"[loadout] x", "", false},
	} {
		got, ok := addressed(c.in, "Loadout")
		if ok != c.ok || ok && got != c.out {
			t.Errorf("addressed(%q) = %q, %v", c.in, got, ok)
		}
	}
}

func TestParse(t *testing.T) {
	m, ok := parse(`@account=ana;msgid=a\sb :ana!u@h PRIVMSG loadout :hello there` + "\r\n")
	if !ok || m.tags["account"] != "ana" || m.tags["msgid"] != "a b" || m.nick() != "ana" || m.command != "PRIVMSG" ||
		!slices.Equal(m.params, []string{"loadout", "hello there"}) {
		t.Fatalf("%+v", m)
	}
	if _, ok := parse("   "); ok {
		t.Fatal("an empty line parsed")
	}
	if got := stripFormatting("\x02bold\x02 \x0304,12red\x03 \x1ditalic\x0f"); got != "bold red italic" {
		t.Fatalf("stripFormatting: %q", got)
	}
	if fold("Ana[]\\~") != "ana{}|^" {
		t.Fatal("rfc1459 casemapping")
	}
}

func TestCheckNamesTheKey(t *testing.T) {
	off := false
	ch := &config.Checker{Section: "irc"}
	Config{Server: "irc.example.org", Nick: "9bot", TLS: &off, Password: "x", Channels: []string{"team"},
		ChannelKeys: map[string]string{"#other": "k"}, AllowedNicks: []string{"a b"}}.Check(ch)
	var all []string
	for _, e := range ch.Errors() {
		all = append(all, e.Error())
	}
	for _, key := range []string{"irc.server", "irc.nick", "irc.channels", "irc.channel_keys", "irc.allowed_nicks"} {
		if !strings.Contains(strings.Join(all, "\n"), "config: "+key+":") {
			t.Errorf("no error names %s: %q", key, all)
		}
	}
	ch = &config.Checker{Section: "irc"}
	Config{Server: "irc.example.org:6697", Nick: "bot", TLS: &off, Password: "x"}.Check(ch)
	if len(ch.Errors()) != 1 || !strings.Contains(ch.Errors()[0].Error(), "config: irc.tls:") {
		t.Fatalf("a password in clear over the network: %v", ch.Errors())
	}
}

// The bot sends a burst of lines at once, then one line per LineEvery.
func TestLinesArePaced(t *testing.T) {
	a := New(Config{Nick: "loadout", Burst: 2, LineEvery: 100 * time.Millisecond}, nil, nil)
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		buf := make([]byte, 1024)
		for {
			if _, err := server.Read(buf); err != nil {
				return
			}
		}
	}()
	c := &conn{nc: client}
	c.lim = a.limiter()
	start := time.Now()
	for range 4 {
		if err := c.write(context.Background(), "PRIVMSG ana :x"); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 180*time.Millisecond {
		t.Fatalf("4 lines with a burst of 2 took %s, want two waits of 100ms", took)
	}
}
