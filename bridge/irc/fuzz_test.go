package irc

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/store/storetest"
)

// Any line from the server, of any shape, from an allowed person or
// not: nothing panics, a line without an allowed account never reaches
// the inbox, and reading costs linear time.
func FuzzServerLine(f *testing.F) {
	for _, s := range []string{
		"@account=ana :ana!a@h PRIVMSG loadout :hello",
		"@account=mallory :m!m@h PRIVMSG loadout :hi",
		":ana!a@h PRIVMSG loadout :no account tag",
		"@account=ana :ana!a@h PRIVMSG #team :loadout, hi",
		"@account=ana;msgid=x :ana!a@h PRIVMSG #team :\x01ACTION waves\x01",
		":ana!a@h JOIN #team ana :Ana", ":ana!a@h ACCOUNT *", ":ana!a@h NICK ana2",
		"@a=\\:\\s\\ :x PRIVMSG", ":srv 330 loadout ana ana :is logged in as", "PING :x", "@;;;= ::: : :",
	} {
		f.Add(s)
	}
	env := storetest.NewEnv(f, storetest.Options{})
	a := New(Config{Nick: "loadout", AllowedNicks: []string{"ana"}}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	c := &conn{nick: "loadout", caps: map[string]bool{"account-tag": true}, whoiss: map[string]*whois{}, nc: discard{}}
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := parse(line)
		if !ok {
			return
		}
		before := inboxCount(env)
		a.handle(context.Background(), c, m)
		allowed := m.command == "PRIVMSG" && a.allowed[fold(m.tags["account"])]
		if n := inboxCount(env); n != before && !allowed {
			t.Fatalf("%q from no allowed account was stored", line)
		}
	})
}

func inboxCount(env *storetest.Env) int {
	var n int
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM inbox_items WHERE channel = 'irc'").Scan(&n)
	return n
}

// Reading, parsing and cleaning a line costs linear time: a line of a
// megabyte of tags, spaces or formatting is read in a moment, and cut;
// an answer of the longest size of such text is flattened and wrapped
// in a moment too.
func TestReadingIsLinear(t *testing.T) {
	for _, line := range []string{
		"@" + strings.Repeat("a=b;", 1<<18), ":" + strings.Repeat(" ", 1<<20) + "x",
		"PRIVMSG x :" + strings.Repeat("\x03,", 1<<19), "PRIVMSG #a :" + strings.Repeat("loadoutx", 1<<17),
		"PRIVMSG #a :" + strings.Repeat("*_[`", 1<<18),
	} {
		start := time.Now()
		got, err := readLine(bufio.NewReader(strings.NewReader(line + "\r\n")))
		if err != nil || len(got) > maxLine {
			t.Fatalf("read %d bytes: %v", len(got), err)
		}
		m, _ := parse(got)
		stripFormatting(m.param(1))
		addressed(m.param(1), "loadout")
		wrapLines(flatten(line[:16384]), 400) // an answer is at most irc.max_answer
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("a line of %d bytes took %s", len(line), took)
		}
	}
}

// discard is a connection that takes every write.
type discard struct{ net.Conn }

func (discard) Write(b []byte) (int, error)      { return len(b), nil }
func (discard) SetWriteDeadline(time.Time) error { return nil }
