// Package emailtest runs, inside a test, the two mail servers the e-mail
// channel talks to: a real IMAP server (go-imap's imapserver with its
// in-memory backend) holding the assistant's mailbox, and an SMTP server
// (go-smtp) that records every message it takes. Tests deliver mail
// into the mailbox as the operator's mail server would, with its
// Authentication-Results header, and read what the channel sent.
package emailtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"loadout/bridge/bridgetest"
)

// The assistant's account on the test servers, and the authserv-id of
// the test's "own mail server".
const (
	Address    = "assistant@example.org"
	Password   = "mail-password"
	AuthservID = "mx.example.org"
)

// Wait is how long a test waits for what must happen.
const Wait = bridgetest.Wait

// Options configure the servers.
type Options struct {
	// NoIdle hides IDLE from the IMAP server's capabilities: the client
	// must poll.
	NoIdle bool
	// TLS, when set, is the servers' certificate: the IMAP server then
	// speaks TLS from the first byte (imaps), and the SMTP server offers
	// STARTTLS.
	TLS *tls.Config
	// NoSMTPAuth: the SMTP server takes mail without AUTH.
	NoSMTPAuth bool
}

// Server is the pair of mail servers.
type Server struct {
	// IMAPAddr and SMTPAddr are the servers' host:port on 127.0.0.1.
	IMAPAddr, SMTPAddr string
	user               *imapmemserver.User
	imap               *imapserver.Server
	smtp               *smtp.Server
	opts               Options

	mu       sync.Mutex
	conns    map[net.Conn]bool
	accepted int
	sent     []Sent
	failing  []error
	attempts int
}

// New starts the servers; they stop when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{opts: o, conns: map[net.Conn]bool{}}
	s.user = imapmemserver.NewUser(Address, Password)
	if err := s.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem := imapmemserver.New()
	mem.AddUser(s.user)
	s.imap = imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapMove: {}, imap.CapUIDPlus: {}},
		InsecureAuth: true,
		Logger:       nopLogger{},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	s.IMAPAddr = ln.Addr().String()
	go s.imap.Serve(&trackedListener{Listener: ln, s: s})

	s.smtp = smtp.NewServer(&backend{s: s})
	s.smtp.Domain = "mx.example.org"
	s.smtp.AllowInsecureAuth = true
	s.smtp.ReadTimeout, s.smtp.WriteTimeout = time.Minute, time.Minute
	s.smtp.MaxMessageBytes = 64 << 20
	s.smtp.ErrorLog = nopLogger{}
	if o.TLS != nil {
		s.smtp.TLSConfig = o.TLS
	}
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.SMTPAddr = sln.Addr().String()
	go s.smtp.Serve(sln)
	t.Cleanup(func() {
		s.imap.Close()
		s.smtp.Close()
	})
	return s
}

// IMAPURL and SMTPURL are the servers' URLs for the channel's config:
// without TLS (loopback), or with it when the servers have a
// certificate.
func (s *Server) IMAPURL() string {
	if s.opts.TLS != nil {
		return "imaps://" + s.IMAPAddr
	}
	return "imap://" + s.IMAPAddr
}

func (s *Server) SMTPURL() string { return "smtp://" + s.SMTPAddr }

type nopLogger struct{}

func (nopLogger) Printf(string, ...interface{}) {}
func (nopLogger) Println(...interface{})        {}

// trackedListener keeps the IMAP connections, so a test can cut them,
// and hides IDLE when asked.
type trackedListener struct {
	net.Listener
	s *Server
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.mu.Lock()
	l.s.conns[c] = true
	l.s.accepted++
	l.s.mu.Unlock()
	if l.s.opts.NoIdle {
		return noIdleConn{c}, nil
	}
	return c, nil
}

// noIdleConn removes IDLE from the capabilities the server announces.
type noIdleConn struct{ net.Conn }

func (c noIdleConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("CAPABILITY")) {
		out := bytes.ReplaceAll(b, []byte(" IDLE"), nil)
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// Connections is how many IMAP connections the server has accepted.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// DropIMAP cuts every open IMAP connection, as a server restart or a
// network failure would.
func (s *Server) DropIMAP() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
		delete(s.conns, c)
	}
}

// File is an attachment of a Mail.
type File struct {
	Name, Type string
	Content    []byte
}

// Mail is a message a person sends.
type Mail struct {
	From, To, Subject string
	// ID is the Message-ID, without angle brackets.
	ID         string
	InReplyTo  string
	References []string
	Text, HTML string
	Files      []File
	// Auth is the Authentication-Results header the operator's server
	// added ("" for none): see Pass.
	Auth string
	// Headers are more header fields, in order.
	Headers [][2]string
}

// Pass is an Authentication-Results of the test's own mail server
// saying the From domain passed DMARC.
func Pass(domain string) string {
	return AuthservID + "; spf=pass smtp.mailfrom=" + domain + "; dkim=pass header.d=" + domain + "; dmarc=pass header.from=" + domain
}

// Bytes is the message as the mailbox stores it.
func (m Mail) Bytes() []byte {
	var h mail.Header
	for _, f := range m.Headers {
		h.Add(f[0], f[1])
	}
	if m.Auth != "" {
		h.Add("Authentication-Results", m.Auth)
	}
	h.SetDate(time.Now())
	h.Set("From", m.From)
	to := m.To
	if to == "" {
		to = Address
	}
	h.Set("To", to)
	h.SetSubject(m.Subject)
	if m.ID != "" {
		h.SetMessageID(m.ID)
	}
	if m.InReplyTo != "" {
		h.SetMsgIDList("In-Reply-To", []string{m.InReplyTo})
	}
	if len(m.References) > 0 {
		h.SetMsgIDList("References", m.References)
	}
	var b bytes.Buffer
	w, err := mail.CreateWriter(&b, h)
	if err != nil {
		panic(err)
	}
	iw, _ := w.CreateInline()
	var ph mail.InlineHeader
	ph.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	if m.Text != "" || m.HTML == "" {
		pw, _ := iw.CreatePart(ph)
		io.WriteString(pw, m.Text)
		pw.Close()
	}
	if m.HTML != "" {
		ph.SetContentType("text/html", map[string]string{"charset": "utf-8"})
		pw, _ := iw.CreatePart(ph)
		io.WriteString(pw, m.HTML)
		pw.Close()
	}
	iw.Close()
	for _, f := range m.Files {
		var ah mail.AttachmentHeader
		ah.SetContentType(f.Type, nil)
		ah.SetFilename(f.Name)
		aw, _ := w.CreateAttachment(ah)
		aw.Write(f.Content)
		aw.Close()
	}
	w.Close()
	return b.Bytes()
}

// Deliver stores m in the mailbox (INBOX), as the operator's mail server
// does, and returns its UID.
func (s *Server) Deliver(t testing.TB, m Mail) uint32 {
	t.Helper()
	return s.DeliverRaw(t, m.Bytes())
}

// DeliverRaw stores a message as it is.
func (s *Server) DeliverRaw(t testing.TB, raw []byte) uint32 {
	t.Helper()
	data, err := s.user.Append("INBOX", bytes.NewReader(raw), &imap.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return uint32(data.UID)
}

// Stored is a message of a mailbox.
type Stored struct {
	UID   uint32
	Seen  bool
	Flags []imap.Flag
	Raw   []byte
}

// Mailbox lists a mailbox's messages, read through an IMAP client of
// its own.
func (s *Server) Mailbox(t testing.TB, name string) []Stored {
	t.Helper()
	c, err := s.client()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sel, err := c.Select(name, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) {
			return nil // no such mailbox
		}
		t.Fatal(err)
	}
	if sel.NumMessages == 0 {
		return nil
	}
	var set imap.SeqSet
	set.AddRange(1, 0)
	section := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(set, &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out []Stored
	for _, m := range msgs {
		st := Stored{UID: uint32(m.UID), Flags: m.Flags, Raw: m.FindBodySection(section)}
		for _, f := range m.Flags {
			st.Seen = st.Seen || f == imap.FlagSeen
		}
		out = append(out, st)
	}
	return out
}

func (s *Server) client() (*imapclient.Client, error) {
	var c *imapclient.Client
	var err error
	if s.opts.TLS != nil {
		c, err = imapclient.DialTLS(s.IMAPAddr, &imapclient.Options{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	} else {
		c, err = imapclient.DialInsecure(s.IMAPAddr, nil)
	}
	if err != nil {
		return nil, err
	}
	if err := c.Login(Address, Password).Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Sent is a message the SMTP server took.
type Sent struct {
	// From and To are the envelope's.
	From, To string
	Header   mail.Header
	// ID is its Message-ID, InReplyTo and References its threading
	// headers, without angle brackets.
	ID         string
	InReplyTo  []string
	References []string
	Subject    string
	// Text and HTML are its parts; Files its attachments, name →
	// content.
	Text, HTML string
	Files      map[string][]byte
	Raw        []byte
	// TLS: the message came over a TLS connection.
	TLS bool
}

// Sent is every message the SMTP server took, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Count is how many messages the SMTP server took.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// Attempts is how many messages were offered to the SMTP server,
// refused ones included.
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Fail makes the SMTP server refuse the next messages with errs, one
// each, in order.
func (s *Server) Fail(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = append(s.failing, errs...)
}

// ClearFailures lets the SMTP server take messages again.
func (s *Server) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = nil
}

// WaitFor waits until cond holds, or fails the test.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, "emailtest: "+what, nil, cond)
}

func parseSent(raw []byte) (Sent, error) {
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		return Sent{}, err
	}
	defer mr.Close()
	out := Sent{Header: mr.Header, Raw: raw, Files: map[string][]byte{}}
	out.ID, _ = mr.Header.MessageID()
	out.InReplyTo, _ = mr.Header.MsgIDList("In-Reply-To")
	out.References, _ = mr.Header.MsgIDList("References")
	out.Subject, _ = mr.Header.Subject()
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Sent{}, err
		}
		b, _ := io.ReadAll(p.Body)
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := h.ContentType()
			if ct == "text/html" {
				out.HTML = string(b)
			} else {
				out.Text = string(b)
			}
		case *mail.AttachmentHeader:
			name, _ := h.Filename()
			out.Files[name] = b
		}
	}
	return out, nil
}

type backend struct{ s *Server }

func (b *backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	return &session{s: b.s, tls: isTLS, authed: b.s.opts.NoSMTPAuth}, nil
}

type session struct {
	s        *Server
	tls      bool
	authed   bool
	from, to string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != Address || pass != Password {
			return errors.New("invalid credentials")
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	s.s.attempts++
	if len(s.s.failing) > 0 {
		err := s.s.failing[0]
		s.s.failing = s.s.failing[1:]
		return err
	}
	m, err := parseSent(raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, Message: "unreadable message: " + err.Error()}
	}
	m.From, m.To, m.TLS = s.from, s.to, s.tls
	s.s.sent = append(s.s.sent, m)
	return nil
}

func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }

// TLS makes a certificate for mail.example.org and 127.0.0.1: the
// servers' configuration, and the client's, which trusts it alone.
func TLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mail.example.org"},
		DNSNames: []string{"mail.example.org"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool}
}

// Dialer dials addr whatever address is asked for: a channel configured
// with a server's public name reaches the test's server.
func Dialer(addr string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// Body is a sent message's text without the line endings' CRs, trimmed.
func (m Sent) Body() string {
	return strings.TrimSpace(strings.ReplaceAll(m.Text, "\r\n", "\n"))
}
