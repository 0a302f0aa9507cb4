package irc

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// wanted are the IRCv3 capabilities the bot asks for, those the server
// offers: who is signed in to which account (account-tag on each
// message, extended-join and account-notify for the people it shares a
// channel with), SASL, message ids, and server-time (to tell a channel's
// history played back at a join from what is said now).
func wanted() []string {
	return []string{"account-tag", "extended-join", "account-notify", "message-tags", "sasl", "server-time"}
}

// errRefused is the server or its services refusing the bot's account:
// trying again will not help.
var errRefused = errors.New("irc: refused")

// conn is one connection to the server, registered: the bot's nick is
// set and its account signed in.
type conn struct {
	nc   net.Conn
	r    *bufio.Reader
	lim  *rate.Limiter // nil: unpaced
	caps map[string]bool
	// nick is the bot's nick; prefix is its nick!user@host as the
	// server showed it ("" when it did not).
	nick, prefix string
	// since is when the connection was registered.
	since time.Time
	// nickLen and chanLen are the server's NICKLEN and CHANNELLEN.
	nickLen, chanLen int

	wmu    sync.Mutex
	broken bool

	qmu    sync.Mutex
	whoiss map[string]*whois // by folded nick
}

// whois is a WHOIS the bot asked and waits on.
type whois struct {
	done    chan struct{}
	account string
}

// dial connects to the server and registers: TLS when on, the
// capabilities, SASL PLAIN when a password is set, the nick. It returns
// errRefused (wrapped) when the account is refused.
func (a *Adapter) dial(ctx context.Context) (*conn, error) {
	cfg := a.cfg
	d := net.Dialer{Timeout: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("irc: connect to %s: %w", cfg.Server, err)
	}
	if cfg.tls() {
		tc, err := a.handshake(ctx, nc)
		if err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	if cfg.Conn != nil {
		nc = cfg.Conn(nc)
	}
	c := &conn{nc: nc, r: bufio.NewReaderSize(nc, 4096), caps: map[string]bool{}, nickLen: 30, chanLen: 64, whoiss: map[string]*whois{}}
	c.lim = a.limiter()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	nc.SetDeadline(time.Now().Add(registerTimeout))
	if err := c.register(ctx, cfg); err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// limiter paces the lines the bot sends: a burst of Burst, then one
// every LineEvery; nil when LineEvery is negative.
func (a *Adapter) limiter() *rate.Limiter {
	if a.cfg.LineEvery < 0 {
		return nil
	}
	return rate.NewLimiter(rate.Every(a.cfg.LineEvery), a.cfg.Burst)
}

// registerTimeout bounds the registration.
const registerTimeout = 30 * time.Second

// handshake makes nc a TLS connection that trusts the system's roots and
// the CA file, if one is set.
func (a *Adapter) handshake(ctx context.Context, nc net.Conn) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(a.cfg.Server)
	conf := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if a.cfg.CAFile != "" {
		pem, err := os.ReadFile(a.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("irc.ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("irc.ca_file: %s holds no PEM certificate", a.cfg.CAFile)
		}
		conf.RootCAs = pool
	}
	tc := tls.Client(nc, conf)
	hctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, fmt.Errorf("irc: TLS with %s: %w", a.cfg.Server, err)
	}
	return tc, nil
}

// register negotiates capabilities, signs in with SASL and sets the
// nick, until the server's welcome and message of the day are done.
func (c *conn) register(ctx context.Context, cfg Config) error {
	c.nick = cfg.Nick
	for _, l := range []string{"CAP LS 302", "NICK " + cfg.Nick, "USER " + cfg.user() + " 0 * :" + cfg.realName()} {
		if err := c.raw(l); err != nil {
			return err
		}
	}
	var offered []string
	tries := 0
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("irc: registering with %s: %w", cfg.Server, err)
		}
		switch m.command {
		case "PING":
			err = c.raw("PONG :" + m.param(0))
		case "CAP":
			switch strings.ToUpper(m.param(1)) {
			case "LS":
				last := m.params[len(m.params)-1]
				for _, cp := range strings.Fields(last) {
					name, _, _ := strings.Cut(cp, "=")
					offered = append(offered, name)
				}
				if m.param(2) == "*" {
					continue // more to come
				}
				var req []string
				for _, w := range wanted() {
					for _, o := range offered {
						if w == o {
							req = append(req, w)
						}
					}
				}
				if cfg.Password != "" && !contains(req, "sasl") {
					return errors.New("irc: the server offers no SASL sign-in now (are its services linked?)")
				}
				if len(req) == 0 {
					err = c.raw("CAP END")
				} else {
					err = c.raw("CAP REQ :" + strings.Join(req, " "))
				}
			case "ACK":
				for _, cp := range strings.Fields(m.params[len(m.params)-1]) {
					c.caps[cp] = true
				}
				if cfg.Password != "" {
					if !c.caps["sasl"] {
						return errors.New("irc: the server did not grant SASL")
					}
					err = c.raw("AUTHENTICATE PLAIN")
				} else {
					err = c.raw("CAP END")
				}
			case "NAK":
				return fmt.Errorf("irc: the server refused the capabilities %q", m.params[len(m.params)-1])
			}
		case "AUTHENTICATE":
			if m.param(0) == "+" {
				err = c.authenticate(cfg.account(), cfg.Password)
			}
		case "903": // RPL_SASLSUCCESS
			err = c.raw("CAP END")
		case "902", "904", "905", "906", "908":
			return fmt.Errorf("%w: SASL sign-in as %s failed: %s (check irc.account and irc.password)", errRefused, cfg.account(), m.params[len(m.params)-1])
		case "433", "432": // nick in use, erroneous
			if m.command == "432" || tries >= 5 {
				return fmt.Errorf("%w: the nick %s cannot be used: %s", errRefused, cfg.Nick, m.params[len(m.params)-1])
			}
			tries++
			c.nick += "_"
			err = c.raw("NICK " + c.nick)
		case "001":
			c.nick = m.param(0)
			if f := strings.Fields(m.params[len(m.params)-1]); len(f) > 0 && strings.Contains(f[len(f)-1], "!") {
				c.prefix = f[len(f)-1]
			}
		case "005":
			c.isupport(m.params)
		case "376", "422": // end of MOTD, no MOTD: registered
			c.since = time.Now()
			return nil
		case "ERROR":
			return fmt.Errorf("irc: the server closed the connection: %s", m.param(0))
		case "465", "464":
			return fmt.Errorf("%w: %s", errRefused, m.params[len(m.params)-1])
		}
		if err != nil {
			return err
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// authenticate sends the SASL PLAIN response in chunks of 400 bytes.
func (c *conn) authenticate(account, password string) error {
	b := base64.StdEncoding.EncodeToString([]byte(account + "\x00" + account + "\x00" + password))
	for {
		n := min(len(b), 400)
		if err := c.raw("AUTHENTICATE " + b[:n]); err != nil {
			return err
		}
		b = b[n:]
		if n < 400 {
			return nil
		}
		if b == "" {
			return c.raw("AUTHENTICATE +")
		}
	}
}

// isupport reads the lengths the server announces.
func (c *conn) isupport(params []string) {
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		var n int
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n <= 0 {
			continue
		}
		switch k {
		case "NICKLEN":
			c.nickLen = n
		case "CHANNELLEN":
			c.chanLen = n
		}
	}
}

// read reads the next message, skipping lines that are none; a line
// longer than maxLine is cut there and its rest dropped.
func (c *conn) read() (message, error) {
	for {
		line, err := readLine(c.r)
		if err != nil {
			return message{}, err
		}
		if m, ok := parse(line); ok {
			return m, nil
		}
	}
}

// readLine reads one line of at most maxLine bytes, dropping the rest of
// a longer one; its cost is linear in what it reads.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(b) < maxLine {
			b = append(b, chunk[:min(len(chunk), maxLine-len(b))]...)
		}
		switch {
		case err == nil:
			return string(b), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(b) > 0:
			return string(b), nil
		default:
			return "", err
		}
	}
}

// raw writes one line, unpaced: registration and answers to the server.
func (c *conn) raw(line string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(line)
}

func (c *conn) writeLocked(line string) error {
	if c.broken {
		return errors.New("irc: the connection is closed")
	}
	if _, err := io.WriteString(c.nc, line+"\r\n"); err != nil {
		c.broken = true
		c.nc.Close()
		return fmt.Errorf("irc: write: %w", err)
	}
	return nil
}

// write writes one line once the flood pacing lets it, or returns when
// ctx ends first. A write cut by ctx closes the connection (the server
// may have half a line): Run connects again.
func (c *conn) write(ctx context.Context, line string) error {
	if c.lim != nil {
		if err := c.lim.Wait(ctx); err != nil {
			return err
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	stop := context.AfterFunc(ctx, func() { c.nc.SetWriteDeadline(time.Now()) })
	err := c.writeLocked(line)
	if !stop() && err == nil {
		// ctx ended just as the line went out: the deadline it set must
		// not cut the next line.
		c.nc.SetWriteDeadline(time.Time{})
	}
	return err
}

// courtesy writes a line the bot may as well not send (a notice to a
// stranger, joining again after a kick) when the flood pacing lets it
// at once, so the reading of the server's lines never waits on it.
func (c *conn) courtesy(line string) {
	if c.lim == nil || c.lim.Allow() {
		c.raw(line)
	}
}

// close ends the connection, saying goodbye when it can.
func (c *conn) close() {
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	if c.wmu.TryLock() {
		c.writeLocked("QUIT :bye")
		c.wmu.Unlock()
	}
	c.nc.Close()
}

// accountOf asks the server which account nick is signed in to now
// (WHOIS): "" when none, or when nick is not on the network.
func (c *conn) accountOf(ctx context.Context, nick string) (string, error) {
	key := fold(nick)
	c.qmu.Lock()
	w, asked := c.whoiss[key]
	if !asked {
		w = &whois{done: make(chan struct{})}
		c.whoiss[key] = w
	}
	c.qmu.Unlock()
	if !asked {
		if err := c.write(ctx, "WHOIS "+nick); err != nil {
			c.answered(key)
			return "", err
		}
	}
	select {
	case <-w.done:
		return w.account, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(whoisTimeout):
		c.answered(key)
		return "", fmt.Errorf("irc: the server did not answer WHOIS %s", nick)
	}
}

// whoisTimeout bounds the wait for a WHOIS answer.
const whoisTimeout = 20 * time.Second

// whoisReply takes a line of a WHOIS answer: 330 names the account, 318
// (or 401, no such nick) ends it.
func (c *conn) whoisReply(m message) {
	key := fold(m.param(1))
	switch m.command {
	case "330":
		c.qmu.Lock()
		if w := c.whoiss[key]; w != nil {
			w.account = m.param(2)
		}
		c.qmu.Unlock()
	case "318", "401":
		c.answered(key)
	}
}

// answered ends the WHOIS of key.
func (c *conn) answered(key string) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if w := c.whoiss[key]; w != nil {
		close(w.done)
		delete(c.whoiss, key)
	}
}
