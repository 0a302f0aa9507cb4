package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
	"loadout/bridge/discord/discordtest"
	"loadout/bridge/email/emailtest"
	"loadout/chat/chattest"
	"loadout/store"
)

// Two loadout serve processes share one PostgreSQL database
// (LOADOUT_TEST_DSN), with Discord and e-mail enabled: the first holds
// the Discord gateway and reads the mailbox, and answers. It is killed;
// a direct message and a mail sent while nobody holds either duty, and
// the next ones, are answered once each by the second, which takes both
// duties over when their leases expire.
func TestDutiesMoveWhenTheirHolderIsKilledOnPostgres(t *testing.T) {
	if os.Getenv(store.TestDSNVar) == "" {
		t.Skip("set " + store.TestDSNVar + " to a PostgreSQL server to run this")
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	dc := discordtest.New(t)
	mail := emailtest.New(t, emailtest.Options{})
	model := chattest.NewEchoServer(t)
	dir := t.TempDir()
	dsn, err := store.TestDSN(dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenPostgres(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	const ana, anaMail = "42", "ana@example.org"
	start := func(name string) *child {
		path := filepath.Join(dir, name+".yaml")
		cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-replicas\nstore:\n  driver: postgres\n  path: %s\n  dsn: %q\n"+
			"http:\n  listen: %s\n  metrics: false\ncluster:\n  lease: 3s\nlog:\n  level: info\n"+
			"discord:\n  enabled: true\n  token: %q\n  api_url: %q\n  allowed_users: [%q]\n  send_per_channel_second: -1\n"+
			"email:\n  enabled: true\n  address: %s\n  password: %s\n  imap_url: imap://%s\n  smtp_url: smtp://%s\n"+
			"  allowed_senders: [%s]\n  trusted_authserv_id: %s\n",
			model.URL, filepath.Join(dir, "data", "x.db"), dsn, bridgetest.FreeAddr(t), discordtest.Token, dc.APIURL, ana,
			emailtest.Address, emailtest.Password, mail.IMAPAddr, mail.SMTPAddr, anaMail, emailtest.AuthservID)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return startChild(t, "serve -config "+path)
	}
	// holds reports whether c holds both duties: its pid is in the
	// holder's name ("host:pid:random").
	holds := func(c *child) bool {
		for _, duty := range []string{"discord gateway", "email imap"} {
			var holder string
			if err := db.Gorm().Raw("SELECT holder FROM leases WHERE name = ? AND expires_at > ?", duty, time.Now().UnixMilli()).Scan(&holder).Error; err != nil {
				t.Fatal(err)
			}
			if parts := strings.Split(holder, ":"); len(parts) != 3 || parts[1] != strconv.Itoa(c.cmd.Process.Pid) {
				return false
			}
		}
		return true
	}
	idle := func() bool {
		for _, ch := range []string{"discord", "email"} {
			if items, err := db.Unfinished(t.Context(), ch); err != nil || len(items) > 0 {
				return false
			}
		}
		for _, m := range mail.Mailbox(t, "INBOX") {
			if !m.Seen {
				return false
			}
		}
		return true
	}

	one := start("one")
	bridgetest.Await(t, "the first process to hold both duties", func() bool { return holds(one) && dc.Connected() })
	two := start("two")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the first process logged:\n%s\nthe second:\n%s", bridgetest.Tail(one.logs.String(), 3000), bridgetest.Tail(two.logs.String(), 5000))
		}
	})
	bridgetest.Await(t, "the second process to start its channels", func() bool { return strings.Contains(two.logs.String(), "discord channel ready") })

	dm := dc.DM(ana)
	var texts []string
	send := func(text string) {
		texts = append(texts, text)
		dc.Post(discordtest.Message{Author: discordtest.User{ID: ana, Name: "ana"}, Channel: dm, Content: text})
		mail.Deliver(t, emailtest.Mail{From: anaMail, ID: fmt.Sprintf("m%d@example.org", len(texts)), Auth: emailtest.Pass("example.org"),
			Subject: "about " + text, Text: text})
	}
	answered := func() bool { return len(dc.Sent(dm)) >= len(texts) && len(mail.Sent()) >= len(texts) && idle() }
	send("before")
	bridgetest.Await(t, "the first answers", answered)
	one.cmd.Process.Kill()
	<-one.exited
	send("while nobody holds the duties")
	bridgetest.Await(t, "the second process to take both duties over", func() bool { return holds(two) })
	bridgetest.Await(t, "what came meanwhile to be answered", answered)
	send("after the move")
	bridgetest.Await(t, "the last answers", answered)

	var gotDM, gotMail, wantDM, wantMail []string
	for _, s := range dc.Sent(dm) {
		gotDM = append(gotDM, s.Content)
	}
	for _, s := range mail.Sent() {
		gotMail = append(gotMail, s.Body())
	}
	for _, text := range texts {
		wantDM = append(wantDM, "re: "+text)
		wantMail = append(wantMail, "re: about "+text+"\n\n"+text)
	}
	if !slices.Equal(gotDM, wantDM) || !slices.Equal(gotMail, wantMail) {
		t.Fatalf("answered on Discord\n%q\nand by mail\n%q\nwant each message once, in order:\n%q\n%q", gotDM, gotMail, wantDM, wantMail)
	}
}
