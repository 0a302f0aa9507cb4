package email

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/email/emailtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// People who write to the assistant in the tests, and a stranger.
const (
	ana   = "ana@example.org"
	bea   = "bea@example.net"
	cleo  = "cleo@example.com"
	stray = "mallory@example.com"
)

// testConfig is the channel's configuration against srv.
func testConfig(srv *emailtest.Server) Config {
	return Config{
		Enabled: true, Address: emailtest.Address, Password: emailtest.Password,
		IMAPURL: srv.IMAPURL(), SMTPURL: srv.SMTPURL(),
		AllowedSenders: []string{ana, "Bea <" + bea + ">", cleo}, TrustedAuthservID: emailtest.AuthservID,
		PollEvery: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	}
}

// running runs a until the test ends or stop is called, once it reads
// the mailbox.
func running(t testing.TB, a *Adapter) (stop func()) {
	t.Helper()
	stop = bridgetest.Running(t, a)
	emailtest.WaitFor(t, "the channel to read the mailbox", a.Ready)
	return stop
}

// harness is one test's servers, store and channel.
type harness struct {
	t    *testing.T
	srv  *emailtest.Server
	env  *storetest.Env
	a    *Adapter
	logs *chattest.LogBuffer
	stop func()
}

// newHarness starts the servers and the channel, with mut changing its
// config.
func newHarness(t *testing.T, o emailtest.Options, mut func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, srv: emailtest.New(t, o), env: storetest.NewEnv(t, storetest.Options{}), logs: &chattest.LogBuffer{}}
	cfg := testConfig(h.srv)
	cfg.Delivery = bridge.Delivery{ShutdownGrace: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(h.logs, nil))}
	if mut != nil {
		mut(&cfg)
	}
	a, err := New(cfg, bridge.NewRouter(h.env.Engine, "loadout"), h.env.Store)
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	h.stop = running(t, a)
	return h
}

var ids atomic.Int64

// newID is a fresh Message-ID.
func newID() string { return fmt.Sprintf("m%d.%d@example.org", time.Now().UnixNano(), ids.Add(1)) }

// sentTo is what the SMTP server took for addr.
func sentTo(srv *emailtest.Server, addr string) []emailtest.Sent {
	var out []emailtest.Sent
	for _, s := range srv.Sent() {
		if s.To == addr {
			out = append(out, s)
		}
	}
	return out
}
