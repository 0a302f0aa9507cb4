package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strings"

	"loadout/config"
)

// Check checks the email section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	if _, err := addressOf(c.Address); err != nil {
		ch.Bad("address", "must be the assistant's own e-mail address, such as assistant@example.org: %v", err)
	}
	if _, err := parseEndpoint("imap_url", c.IMAPURL, "imaps", "imap", "993", "143"); err != nil {
		ch.Err(err)
	}
	if _, err := parseEndpoint("smtp_url", c.SMTPURL, "smtps", "smtp", "465", "587"); err != nil {
		ch.Err(err)
	}
	if c.Password == "" {
		ch.Bad("password", "is required when email.enabled is true")
	}
	for _, s := range c.AllowedSenders {
		if _, err := addressOf(s); err != nil {
			ch.Bad("allowed_senders", "must list e-mail addresses such as ana@example.org, got %q", s)
		}
	}
	if strings.TrimSpace(c.TrustedAuthservID) == "" {
		ch.Bad("trusted_authserv_id", "is required when email.enabled is true: the authserv-id your own mail server writes in Authentication-Results (often its host name, such as mx.example.org); without it no sender can be believed")
	}
	if c.PerSenderHour < 0 {
		ch.Bad("per_sender_hour", "must be 1 or more (0: the default, 30), got %d", c.PerSenderHour)
	}
	if c.Mailbox != "" && c.Mailbox == c.QuarantineMailbox {
		ch.Bad("quarantine_mailbox", "must differ from email.mailbox")
	}
}

// addressOf reads one bare address, lower-cased ("Ana <ana@x.org>" and
// "ana@x.org" alike).
func addressOf(s string) (string, error) {
	a, err := mail.ParseAddress(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("%q is not an address: %w", s, err)
	}
	addr := strings.ToLower(a.Address)
	if strings.ContainsAny(addr, "/ ") {
		return "", fmt.Errorf("%q is not an address the channel takes (it holds a slash or a space)", s)
	}
	return addr, nil
}

// How a connection is secured.
const (
	implicitTLS = iota // TLS from the first byte (imaps, smtps)
	startTLS           // STARTTLS required before anything else
	plain              // no TLS: only to a loopback address
)

// endpoint is a server the channel connects to.
type endpoint struct {
	key  string // the config key, for errors
	addr string // host:port
	host string
	mode int
}

// parseEndpoint reads a server URL: secure is the implicit-TLS scheme
// (imaps), starting the one whose connections start plain (imap). The
// plain scheme requires STARTTLS, except to a loopback address (a local
// relay, tests), which is used without TLS.
func parseEndpoint(key, raw, secure, starting, securePort, startPort string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != secure && u.Scheme != starting) {
		return endpoint{}, fmt.Errorf("email.%s must be %s://host:%s, or %s://host:%s with STARTTLS, got %q", key, secure, securePort, starting, startPort, raw)
	}
	if u.User != nil {
		return endpoint{}, fmt.Errorf("email.%s must not hold a user or password (email.username and email.password do)", key)
	}
	host, port := u.Hostname(), u.Port()
	e := endpoint{key: key, host: host, mode: implicitTLS}
	if u.Scheme == starting {
		e.mode = startTLS
		if loopback(host) {
			e.mode = plain
		}
		if port == "" {
			port = startPort
		}
	} else if port == "" {
		port = securePort
	}
	e.addr = net.JoinHostPort(host, port)
	return e, nil
}

// loopback reports whether host names this machine: "localhost" or a
// loopback IP. Other names are not resolved: what DNS says may change.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfig is the TLS configuration for e: the configured one (tests),
// or the system's roots, for e's host name.
func (a *Adapter) tlsConfig(e endpoint) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.cfg.TLSConfig != nil {
		c = a.cfg.TLSConfig.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = e.host
	}
	return c
}

// dial connects to e; with implicit TLS, the handshake is done.
func (a *Adapter) dial(ctx context.Context, e endpoint) (net.Conn, error) {
	conn, err := a.cfg.Dial(ctx, "tcp", e.addr)
	if err != nil {
		return nil, fmt.Errorf("email: connect to %s (email.%s): %w", e.addr, e.key, err)
	}
	if e.mode != implicitTLS {
		return conn, nil
	}
	tc := tls.Client(conn, a.tlsConfig(e))
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("email: TLS with %s (email.%s): %w", e.addr, e.key, err)
	}
	return tc, nil
}

// errNoTLS: a server reached by imap:// or smtp:// that does not offer
// STARTTLS is not used.
var errNoTLS = errors.New("the server does not offer STARTTLS, and a connection without TLS is only made to a loopback address")
