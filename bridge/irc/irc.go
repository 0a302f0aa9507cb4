// Package irc is the IRC channel: private messages to the bot, and
// lines in its channels that address it, reach the shared command layer
// and engine through the delivery pipeline, over one connection (TLS by
// default) to one IRC server, signed in to the bot's services account
// with SASL. A person counts by the services account they are signed in
// to, never by their nick alone, which anyone can take.
//
// The client is written on net and crypto/tls: registration, IRCv3
// capabilities, SASL PLAIN, PING and the few commands the bot reads are
// a small part of IRC, and no client library's own loop and goroutines
// are needed for them.
package irc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"loadout/backoff"
	"loadout/bridge"
)

// Config configures an Adapter. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (irc.enabled).
	Enabled bool `yaml:"enabled"`
	// Server is the IRC server, host:port ("irc.libera.chat:6697").
	Server string `yaml:"server"`
	// TLS connects with TLS; default true. Turn it off only for a
	// server on the same machine.
	TLS *bool `yaml:"tls"`
	// CAFile is a PEM file of certificate authorities trusted besides
	// the system's, for a private server's self-signed certificate.
	CAFile string `yaml:"ca_file"`
	// Nick is the bot's nick.
	Nick string `yaml:"nick"`
	// Account is the bot's services account, signed in to with SASL;
	// default Nick.
	Account string `yaml:"account"`
	// Password is the services account's password (SASL PLAIN). Without
	// it the bot connects unidentified.
	Password string `yaml:"password" secret:"true"`
	// Channels are the channels the bot joins ("#team"), where it
	// answers the lines that address it.
	Channels []string `yaml:"channels"`
	// ChannelKeys are the keys of keyed channels, by channel name.
	ChannelKeys map[string]string `yaml:"channel_keys" secret:"true"`
	// AllowedNicks may use the bot: services account names, compared
	// as IRC compares nicks (rfc1459 casemapping). A message counts as
	// theirs only when the server says its sender is signed in to that
	// account.
	AllowedNicks []string `yaml:"allowed_nicks"`
	// Burst is how many lines the bot may send at once before pacing;
	// default 4.
	Burst int `yaml:"burst"`
	// LineEvery is how often one more line may be sent after a burst;
	// default 2s. Negative: no pacing (a server of your own without
	// flood limits).
	LineEvery time.Duration `yaml:"line_every"`
	// MaxAnswer caps an answer, in bytes, before it is split into
	// lines; default 16384 (about 40 lines). What is longer is cut, saying so.
	MaxAnswer int `yaml:"max_answer"`
	// Workers is the number of turns run at once; default 8.
	Workers int `yaml:"workers"`
	// MaxBackoff caps the wait between connection attempts; default 1m.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Conn, when set, wraps the connection once it is set up (after
	// TLS): tests watch the bot's lines with it.
	Conn func(net.Conn) net.Conn `yaml:"-"`
}

func (c Config) tls() bool        { return c.TLS == nil || *c.TLS }
func (c Config) account() string  { return cmp.Or(c.Account, c.Nick) }
func (c Config) user() string     { return "loadout" }
func (c Config) realName() string { return "loadout assistant" }

// Kind declares the IRC channel to the program that runs it: the
// section irc, whose secrets (the account's password, channel keys) its
// Config declares, and the one credential shape that travels on the
// wire, a SASL PLAIN response.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:     "irc",
		Enabled:  func(c Config) bool { return c.Enabled },
		Shapes:   []string{`AUTHENTICATE [A-Za-z0-9+/=]{8,}`},
		Allowed:  func(c Config) []string { return c.AllowedNicks },
		Describe: func(c Config) string { return "irc (" + c.Nick + " on " + c.Server + ")" },
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store), nil
		},
	})
}

// Adapter connects the bot to one IRC server. Create it with New and
// start it with Run.
type Adapter struct {
	cfg     Config
	router  *bridge.Router
	pipe    *bridge.Pipeline
	allowed map[string]bool // folded accounts
	log     *slog.Logger

	mu      sync.Mutex
	conn    *conn         // nil while disconnected
	up      chan struct{} // closed when conn is set
	started bool
	refused map[string]bool // nicks told they are refused
	// accounts are the accounts of the people the bot shares a channel
	// with, by folded nick (extended-join, account-notify), and of those
	// whose messages carried one.
	accounts map[string]string
	// nicks are the nicks the bot last heard each account under.
	nicks map[string]string
	// verified are private routes' nicks checked with WHOIS, with when.
	verified map[string]time.Time
}

// New returns an adapter that answers through router and keeps its
// inbox in st. It does no I/O: Run connects.
func New(cfg Config, router *bridge.Router, st bridge.Store) *Adapter {
	if cfg.Burst <= 0 {
		cfg.Burst = 4
	}
	if cfg.LineEvery == 0 {
		cfg.LineEvery = 2 * time.Second
	}
	if cfg.MaxAnswer <= 0 {
		cfg.MaxAnswer = 16384
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	cfg.Delivery.Fill(nil)
	a := &Adapter{
		cfg: cfg, router: router, allowed: map[string]bool{}, log: cfg.Logger.With("channel", "irc"),
		up: make(chan struct{}), refused: map[string]bool{}, accounts: map[string]string{}, nicks: map[string]string{},
		verified: map[string]time.Time{},
	}
	for _, n := range cfg.AllowedNicks {
		if n = strings.TrimSpace(n); n != "" {
			a.allowed[fold(n)] = true
		}
	}
	d := cfg.Delivery
	d.Logger = a.log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "irc", Inbox: st, Handler: router, Outlet: a, Workers: cfg.Workers, MaxReply: cfg.MaxAnswer,
	}))
	return a
}

var (
	_ bridge.Channel  = (*Adapter)(nil)
	_ bridge.Readier  = (*Adapter)(nil)
	_ bridge.Admitter = (*Adapter)(nil)
)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "irc" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Ready reports whether the bot is connected and signed in.
func (a *Adapter) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn != nil
}

// Admits reports whether irc.allowed_nicks lets in the account of
// userKey ("irc:ana").
func (a *Adapter) Admits(_ context.Context, userKey string) (bool, error) {
	acct, ok := strings.CutPrefix(userKey, "irc:")
	return ok && a.allowed[fold(acct)], nil
}

// connectDuty names the lease of the connection, which one process of
// those sharing the database holds: two would fight over the nick.
const connectDuty = "irc connection"

// Run connects and signs in, resumes messages left unfinished before a
// restart, and reads the server's lines until ctx is cancelled; a lost
// connection is made again with backoff. Then it stops intake and lets
// in-flight turns finish for ShutdownGrace. It returns nil after a
// cancel, and an error when the server refuses the bot's account or
// nick: trying again would not help.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if len(a.allowed) == 0 {
		a.log.Warn("irc.allowed_nicks is empty: everybody is refused")
	}
	err := a.cfg.Exclusive.Do(ctx, connectDuty, a.loop)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// loop connects, serves the connection and connects again, until ctx
// ends or the account is refused.
func (a *Adapter) loop(ctx context.Context) error {
	wait := backoff.Policy{Max: a.cfg.MaxBackoff, Jitter: 0.2}.New()
	for {
		c, err := a.dial(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRefused) {
			return err
		}
		if err != nil {
			d := wait.Next()
			a.cfg.Observer.Retried("irc")
			a.log.Warn("irc: cannot connect; retrying", "server", a.cfg.Server, "err", err, "wait", d)
			if wait.Wait(ctx, d) != nil {
				return nil
			}
			continue
		}
		wait.Reset()
		a.log.Info("irc connected", "server", a.cfg.Server, "nick", c.nick, "caps", strings.Join(keys(c.caps), " "))
		err = a.serve(ctx, c)
		if ctx.Err() != nil {
			// What is being sent is cut by the pipeline, and resumed
			// after the next start, before the connection goes.
			a.pipe.Stop()
		}
		c.close()
		if ctx.Err() != nil {
			return nil
		}
		a.log.Warn("irc: the connection ended; connecting again", "err", err)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// serve joins the channels, starts the pipeline once, and reads the
// connection until it fails or ctx ends.
func (a *Adapter) serve(ctx context.Context, c *conn) error {
	for _, line := range joins(a.cfg.Channels, a.cfg.ChannelKeys) {
		if err := c.raw(line); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.conn = c
	close(a.up)
	started := a.started
	a.started = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.conn, a.up = nil, make(chan struct{})
		a.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { c.nc.SetReadDeadline(time.Now()) })
	defer stop()
	if !started {
		// The pipeline reads the connection's lines only after resuming:
		// a message in the meantime waits in the inbox, in order.
		errs := make(chan error, 1)
		go func() { errs <- a.pipe.Start(ctx) }()
		defer func() { <-errs }()
	}
	return a.read(ctx, c)
}

// joins are the JOIN lines for channels, keyed ones with their keys.
func joins(channels []string, keyOf map[string]string) []string {
	var out []string
	for _, ch := range channels {
		ch = strings.TrimSpace(ch)
		if ch == "" {
			continue
		}
		if k := keyFor(ch, keyOf); k != "" {
			out = append(out, "JOIN "+ch+" "+k)
		} else {
			out = append(out, "JOIN "+ch)
		}
	}
	return out
}

func keyFor(ch string, keyOf map[string]string) string {
	for name, k := range keyOf {
		if fold(name) == fold(ch) {
			return k
		}
	}
	return ""
}

// current is the connection other than old (nil: any), waited for
// while Run connects again, for at most reconnectWait.
func (a *Adapter) current(ctx context.Context, old *conn) (*conn, error) {
	t := time.NewTimer(reconnectWait)
	defer t.Stop()
	for {
		a.mu.Lock()
		c, up := a.conn, a.up
		a.mu.Unlock()
		if c != nil && c != old {
			return c, nil
		}
		if c != nil {
			// old is still the connection: its reader has not seen it
			// fail yet.
			up = nil
		}
		select {
		case <-up:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, errors.New("irc: not connected to the server")
		}
	}
}

// reconnectWait is how long a send waits for the connection to return.
const reconnectWait = 30 * time.Second

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	// To is the channel, or the nick of a private chat.
	To string `json:"to"`
	// Account, in a private chat, is the account the person is signed
	// in to: an answer goes to To only while To is signed in to it.
	Account string `json:"account,omitempty"`
}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) {
	var r route
	if err := json.Unmarshal(raw, &r); err != nil || r.To == "" {
		return nil, fmt.Errorf("irc: unreadable route %q: %v", raw, err)
	}
	return r, nil
}

func asRoute(rt any) (route, error) {
	r, ok := rt.(route)
	if !ok {
		return route{}, fmt.Errorf("irc: %T is not an IRC route", rt)
	}
	return r, nil
}

func (r route) encode() []byte {
	b, _ := json.Marshal(r) // strings always encode
	return b
}

// Chat keys: "irc:#channel" for a channel (folded), "irc:<account>" for
// the private chat with the person signed in to account (folded), which
// is also their user key. Accounts never start with a channel prefix.

// Route is where messages to the chat key go: the channel, or the nick
// the account was last heard under (else the account's name, which is
// a nick of theirs on services that register nicks).
func (a *Adapter) Route(key string) ([]byte, error) {
	rest, ok := strings.CutPrefix(key, "irc:")
	if !ok || rest == "" {
		return nil, fmt.Errorf("irc: %q is not an IRC chat", key)
	}
	if isChannel(rest) {
		return route{To: rest}.encode(), nil
	}
	a.mu.Lock()
	nick := cmp.Or(a.nicks[rest], rest)
	a.mu.Unlock()
	return route{To: nick, Account: rest}.encode(), nil
}

// Private reports whether the chat is one person's private messages.
func (a *Adapter) Private(key string) bool {
	rest, ok := strings.CutPrefix(key, "irc:")
	return ok && rest != "" && !isChannel(rest)
}

// Invite says how a person reaches the bot alone.
func (a *Adapter) Invite(command string) string {
	return "Send me a private message (/msg " + a.cfg.Nick + " /" + command + ")."
}

// Nick is the bot's nick on the server now; irc.nick before Run
// connects.
func (a *Adapter) Nick() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		return a.conn.nick
	}
	return a.cfg.Nick
}
