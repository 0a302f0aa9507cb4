package email

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/email/emailtest"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store"
	"loadout/store/storetest"
)

// Environment of a replica process: the mail servers and the database
// the replicas share.
const (
	envReplicaIMAP = "LOADOUT_TEST_EMAIL_REPLICA_IMAP"
	envReplicaSMTP = "LOADOUT_TEST_EMAIL_REPLICA_SMTP"
	envReplicaDB   = "LOADOUT_TEST_EMAIL_REPLICA_DB"
)

// TestEmailReplica is a process of TestMailboxMovesWhenItsHolderIsKilled:
// the channel on the parent's mail servers and shared database, reading
// the mailbox under a lease while it can. It runs until it is killed.
func TestEmailReplica(t *testing.T) {
	imapAddr := os.Getenv(envReplicaIMAP)
	if imapAddr == "" || os.Getenv(bridgetest.EnvReplica) == "" {
		t.Skip("run by TestMailboxMovesWhenItsHolderIsKilled")
	}
	env, d := bridgetest.ReplicaEnv(t, os.Getenv(envReplicaDB), chattest.NewEchoServer(t))
	a, err := New(Config{Address: emailtest.Address, Password: emailtest.Password, IMAPURL: "imap://" + imapAddr,
		SMTPURL: "smtp://" + os.Getenv(envReplicaSMTP), AllowedSenders: []string{ana, bea, cleo}, TrustedAuthservID: emailtest.AuthservID,
		PollEvery: time.Second, MaxBackoff: 200 * time.Millisecond, Delivery: d}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if err != nil {
		t.Fatal(err)
	}
	a.Run(context.Background())
}

// settled reports whether every message of the mailbox was handled and
// every answer the inbox took on is sent: nothing more will go out.
func settled(t *testing.T, srv *emailtest.Server, db *store.DB) bool {
	for _, m := range srv.Mailbox(t, "INBOX") {
		if !m.Seen {
			return false
		}
	}
	return bridgetest.Idle(t, db, "email")
}

// Two processes share one database (a file, or PostgreSQL with
// LOADOUT_TEST_DSN); the first reads the mailbox and answers. It is
// killed (SIGKILL); mail arrives while nobody reads the mailbox. The
// second takes the mailbox over once the lease expires, resumes after
// the last UID the first handled, and answers what arrived meanwhile
// once; then the next message as it comes.
func TestMailboxMovesWhenItsHolderIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := emailtest.New(t, emailtest.Options{})
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "loadout.db")
	db, err := store.OpenTest(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	env := []string{envReplicaIMAP + "=" + srv.IMAPAddr, envReplicaSMTP + "=" + srv.SMTPAddr, envReplicaDB + "=" + dbPath}
	holder := func() string { return bridgetest.LeaseHolder(t, db, "email imap") }

	one := bridgetest.StartReplica(t, dir, "TestEmailReplica", "one", env...)
	one.WaitLogged(t, "email connected")
	two := bridgetest.StartReplica(t, dir, "TestEmailReplica", "two", env...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the first process logged:\n%s\nthe second:\n%s", bridgetest.Tail(one.Log(), 3000), bridgetest.Tail(two.Log(), 5000))
		}
	})
	if h := holder(); h != "one" {
		t.Fatalf("the mailbox is held by %q", h)
	}
	var sent []string
	deliver := func(text string) {
		sent = append(sent, text)
		srv.Deliver(t, from(ana, emailtest.Mail{Subject: text, Text: text}))
	}
	wait := func() {
		t.Helper()
		bridgetest.Await(t, "every message to be answered", func() bool {
			return len(sentTo(srv, ana)) >= len(sent) && settled(t, srv, db)
		})
	}
	deliver("before")
	wait()
	one.Kill()
	deliver("while nobody reads the mailbox")
	bridgetest.Await(t, "the second process to take the mailbox over", func() bool { return holder() == "two" })
	wait()
	deliver("after the move")
	wait()

	var got, want []string
	for _, s := range sentTo(srv, ana) {
		got = append(got, s.Body())
	}
	for _, text := range sent {
		want = append(want, "re: "+text+"\n\n"+text) // the subject, then the text
	}
	if !slices.Equal(got, want) {
		t.Fatalf("answers\n%q\nwant each message once, in order:\n%q", got, want)
	}
	if !strings.Contains(two.Log(), "read back messages that arrived while disconnected") {
		t.Fatal("the second process did not read back what arrived while nobody read the mailbox")
	}
}

// The per-sender limit is counted in the store: a sender answered by one
// process is counted by the next to read the mailbox. With a limit of
// three an hour, two messages answered by the first process and three
// more read by the second get three answers, and the second says why
// it left the others.
func TestPerSenderLimitHoldsAcrossProcesses(t *testing.T) {
	srv := emailtest.New(t, emailtest.Options{})
	path := filepath.Join(t.TempDir(), "loadout.db")
	model := chattest.NewModelServer(t)
	model.Fallback = "ok"
	logs := &chattest.LogBuffer{}
	start := func(holder string) (*Adapter, *storetest.Env, func()) {
		env := storetest.NewEnv(t, storetest.Options{DBPath: path, Model: model})
		log := slog.New(slog.NewTextHandler(logs, nil)).With("process", holder)
		cfg := testConfig(srv)
		cfg.PerSenderHour = 3
		cfg.Delivery = bridge.Delivery{ShutdownGrace: time.Nanosecond, Logger: log,
			Exclusive: cluster.Exclusive(env.Store, holder, bridgetest.ReplicaLease, log),
			Claim:     cluster.Claim(env.Store, holder, bridgetest.ReplicaLease, log)}
		a, err := New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return a, env, stop
	}
	one, env, stopOne := start("one")
	bridgetest.Await(t, "the first process to read the mailbox", one.Ready)
	two, _, _ := start("two")
	for _, text := range []string{"first", "second"} {
		srv.Deliver(t, from(cleo, emailtest.Mail{Subject: text, Text: text}))
	}
	bridgetest.Await(t, "two answers", func() bool { return len(sentTo(srv, cleo)) == 2 && settled(t, srv, env.Store) })
	stopOne() // gives the mailbox up
	bridgetest.Await(t, "the second process to read the mailbox", two.Ready)
	for _, text := range []string{"third", "fourth", "fifth"} {
		srv.Deliver(t, from(cleo, emailtest.Mail{Subject: text, Text: text}))
	}
	bridgetest.Await(t, "every message to be read", func() bool { return settled(t, srv, env.Store) })
	if n := len(sentTo(srv, cleo)); n != 3 {
		t.Fatalf("%d answers to five messages, want 3 (the hourly limit across both processes)", n)
	}
	var limited []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "more than email allows in an hour") {
			limited = append(limited, line)
		}
	}
	if len(limited) != 2 || !strings.Contains(limited[0], "process=two") || !strings.Contains(limited[1], "process=two") {
		t.Fatalf("the second process did not say why it left two messages:\n%s", logs)
	}
}
