// Package email is the e-mail channel: mail to the assistant's own
// address, read over IMAP (IDLE, or polling where the server has no
// IDLE), reaches the shared command layer and engine through the
// delivery pipeline, and the answers go out over SMTP as replies in the
// same thread.
//
// A From header is not a person: anyone can write any From. A message
// counts as from an allowed address only when the topmost
// Authentication-Results header, the one the operator's own mail server
// added (its authserv-id is email.trusted_authserv_id), says dmarc=pass
// for the From domain, or dkim=pass for a domain aligned with it. Any
// other message is moved, unread, to
// email.quarantine_mailbox and logged; it is never answered.
package email

import (
	"context"
	"crypto/tls"
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
// Only the fields with a yaml key are read from the configuration file;
// the others are for tests and embedding.
type Config struct {
	// Delivery is what the process gives every channel.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (email.enabled).
	Enabled bool `yaml:"enabled"`
	// Address is the assistant's own address: the From of its answers,
	// and mail from it is never answered.
	Address string `yaml:"address"`
	// IMAPURL is where mail is read: imaps://host:993, or
	// imap://host:143 with STARTTLS required. Without TLS only to a
	// loopback address.
	IMAPURL string `yaml:"imap_url" secret:"url"`
	// SMTPURL is where answers are sent: smtps://host:465, or
	// smtp://host:587 with STARTTLS required. Without TLS only to a
	// loopback address.
	SMTPURL string `yaml:"smtp_url" secret:"url"`
	// Username and Password log in to both servers; Username defaults to
	// Address.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true"`
	// AllowedSenders may use the assistant: addresses
	// ("ana@example.org"), compared without case. Nobody else may.
	AllowedSenders []string `yaml:"allowed_senders"`
	// TrustedAuthservID is the authserv-id of the operator's own mail
	// server: the topmost Authentication-Results header is believed
	// only when it is of this id; the headers below it never are.
	TrustedAuthservID string `yaml:"trusted_authserv_id"`
	// Mailbox is the folder read; default INBOX.
	Mailbox string `yaml:"mailbox"`
	// QuarantineMailbox is where mail that is not authenticated, or
	// cannot be read, is moved, unread; default Quarantine. It is made
	// when missing.
	QuarantineMailbox string `yaml:"quarantine_mailbox"`

	// Name is the display name of the assistant's From; default
	// "loadout".
	Name string `yaml:"-"`
	// PollEvery is how often the mailbox is checked without IDLE, and
	// how long one IDLE lasts before it is renewed; default 1m.
	PollEvery time.Duration `yaml:"-"`
	// MaxMessage is the largest message read, in bytes; a larger one is
	// quarantined unread. Default 25 MB.
	MaxMessage int64 `yaml:"-"`
	// PerSenderHour is how many messages of one sender are answered in
	// an hour; more are left unanswered (a loop breaker). Default 30.
	// They are counted in the store, for every process sharing it.
	PerSenderHour int `yaml:"per_sender_hour"`
	// MaxBackoff caps the wait between tries after a server failed;
	// default 1m.
	MaxBackoff time.Duration `yaml:"-"`
	// TLSConfig verifies the servers' certificates; default the system's
	// roots and the URL's host name.
	TLSConfig *tls.Config `yaml:"-"`
	// Dial opens connections; default a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error) `yaml:"-"`
}

// Kind declares the e-mail channel to the program that runs it.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "email",
		Enabled: func(c Config) bool { return c.Enabled },
		Allowed: func(c Config) []string { return c.AllowedSenders },
		Shapes:  TokenShapes(),
		Describe: func(c Config) string {
			return "email (" + c.Address + ")"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			st, ok := env.Store.(Store)
			if !ok {
				return nil, errors.New("email: the channel counts each sender's messages in the store, and this store counts none")
			}
			c.Delivery = env.Delivery
			return New(c, env.Router, st)
		},
	})
}

// Store is what the channel keeps: its inbox and small states, and the
// count of each sender's messages, which every process sharing the
// database reads, so the hourly limit holds whichever process reads the
// mailbox. store.DB is one.
type Store interface {
	bridge.Store
	// Hit counts event ref under key for window when fewer than max were
	// counted in the last window, and reports whether it did; an event
	// counted before is allowed again without counting twice.
	Hit(ctx context.Context, key, ref string, max int, window time.Duration) (bool, error)
}

// TokenShapes are the forms of mail credentials redacted wherever they
// appear: a user and password written into a mail server's URL.
func TokenShapes() []string {
	return []string{`(?:imaps?|smtps?)://[^\s/@:]+:[^\s/@]+@`}
}

// Adapter connects one mailbox to a router. Create it with New and start
// it with Run.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	pipe   *bridge.Pipeline
	store  Store
	log    *slog.Logger
	imap   endpoint
	smtp   endpoint
	self   string
	allow  map[string]bool

	mu      sync.Mutex
	ready   bool
	started bool
	refused map[string]bool
}

// New returns an adapter for the mailbox cfg names that answers through
// router and keeps its inbox and small states in st. It checks the URLs
// (and their TLS rule) but does no I/O: Run connects.
func New(cfg Config, router *bridge.Router, st Store) (*Adapter, error) {
	if cfg.Mailbox == "" {
		cfg.Mailbox = "INBOX"
	}
	if cfg.QuarantineMailbox == "" {
		cfg.QuarantineMailbox = "Quarantine"
	}
	if cfg.Username == "" {
		cfg.Username = cfg.Address
	}
	if cfg.Name == "" {
		cfg.Name = "loadout"
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = time.Minute
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = 25 << 20
	}
	if cfg.PerSenderHour <= 0 {
		cfg.PerSenderHour = 30
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	cfg.Delivery.Fill(nil)
	self, err := addressOf(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("email.address: %w", err)
	}
	im, err := parseEndpoint("imap_url", cfg.IMAPURL, "imaps", "imap", "993", "143")
	if err != nil {
		return nil, err
	}
	sm, err := parseEndpoint("smtp_url", cfg.SMTPURL, "smtps", "smtp", "465", "587")
	if err != nil {
		return nil, err
	}
	allow := map[string]bool{}
	for _, s := range cfg.AllowedSenders {
		if addr, err := addressOf(s); err == nil {
			allow[addr] = true
		}
	}
	log := cfg.Logger.With("channel", "email")
	a := &Adapter{
		cfg: cfg, router: router, store: st, log: log, imap: im, smtp: sm, self: self, allow: allow,
		refused: map[string]bool{},
	}
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "email", Inbox: st, Handler: router, Outlet: a,
	}))
	return a, nil
}

// Run reads the mailbox until ctx is cancelled, reconnecting after a
// failure and resuming after the last message stored; then it stops
// intake and lets in-flight turns finish for ShutdownGrace. It returns
// nil after a cancel, and an error when the IMAP server refuses the
// account's credentials.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if len(a.allow) == 0 {
		a.log.Warn("email.allowed_senders is empty: nobody is answered")
	}
	if a.cfg.Exclusive != nil {
		// Replicas share the inbox: each runs a pipeline whether or not
		// it is the one that reads the mailbox.
		if err := a.startPipeline(ctx); err != nil {
			return nil
		}
	}
	err := a.cfg.Exclusive.Do(ctx, "email imap", a.readLoop)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// patient retries what a server failed, waiting up to MaxBackoff, until
// ctx ends or the error is final.
func (a *Adapter) patient(what string) backoff.Policy {
	return backoff.Policy{Initial: 500 * time.Millisecond, Max: a.cfg.MaxBackoff, Jitter: 0.2, OnRetry: func(err error, wait time.Duration) {
		a.cfg.Observer.Retried("email")
		a.log.Warn("email: "+what+" failed; retrying", "err", err, "wait", wait)
	}}
}

// startPipeline starts the pipeline, once.
func (a *Adapter) startPipeline(ctx context.Context) error {
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	if started {
		return nil
	}
	if err := a.pipe.Start(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	a.started = true
	a.mu.Unlock()
	return nil
}

func (a *Adapter) setReady(ok bool) {
	a.mu.Lock()
	a.ready = ok
	a.mu.Unlock()
}

// Ready reports whether the adapter is logged in to the IMAP server and
// reading the mailbox.
func (a *Adapter) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

// route is where an answer goes; the pipeline stores it, as JSON, with
// the message.
type route struct {
	// To is the person's address.
	To string `json:"to"`
	// Root is the thread's first message id (without angle brackets).
	Root string `json:"root"`
	// Subject is the subject of the person's message.
	Subject string `json:"subject,omitempty"`
	// InReplyTo is the message answered.
	InReplyTo string `json:"in_reply_to,omitempty"`
	// References are the thread's message ids, oldest first, the
	// message answered last.
	References []string `json:"references,omitempty"`
}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) {
	var r route
	if err := json.Unmarshal(raw, &r); err != nil || r.To == "" {
		return nil, fmt.Errorf("email: unreadable route %q: %v", raw, err)
	}
	return r, nil
}

func asRoute(rt any) (route, error) {
	r, ok := rt.(route)
	if !ok {
		return route{}, fmt.Errorf("email: %T is not an e-mail route", rt)
	}
	return r, nil
}

func (r route) encode() []byte {
	b, _ := json.Marshal(r) // strings always encode
	return b
}

// maxRoot is the longest thread id a chat key holds; a longer one (a
// Message-ID may be up to a line long) is shortened, and its chat's
// notices then start a new thread.
const maxRoot = 200

// chatKey is the chat of one thread of one person:
// "email:<address>/<root message id>". Addresses the channel takes hold
// no slash.
// Admits reports whether email.allowed_senders lets in the person with
// this key ("email:ana@example.org") now (bridge.Admitter).
func (a *Adapter) Admits(_ context.Context, userKey string) (bool, error) {
	addr, ok := strings.CutPrefix(userKey, "email:")
	return ok && addr != "" && a.allow[addr], nil
}

var _ bridge.Admitter = (*Adapter)(nil)

func chatKey(addr, root string) string {
	if len(root) > maxRoot {
		root = root[:maxRoot]
	}
	return "email:" + addr + "/" + root
}

func routeOf(key string) (route, error) {
	rest, ok := strings.CutPrefix(key, "email:")
	addr, root, _ := strings.Cut(rest, "/")
	if !ok || !strings.Contains(addr, "@") || root == "" {
		return route{}, fmt.Errorf("email: %q is not an e-mail chat", key)
	}
	r := route{To: addr, Root: root}
	if len(root) < maxRoot {
		r.InReplyTo, r.References = root, []string{root}
	}
	return r, nil
}

var _ bridge.Channel = (*Adapter)(nil)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "email" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Route is where messages to the chat key names go: a reply in its
// thread.
func (a *Adapter) Route(key string) ([]byte, error) {
	r, err := routeOf(key)
	if err != nil {
		return nil, err
	}
	return r.encode(), nil
}

// Private reports whether the chat is one person's: every e-mail chat
// is a thread of one sender with the assistant.
func (a *Adapter) Private(key string) bool {
	_, err := routeOf(key)
	return err == nil
}

// maxPart is the longest answer sent as one e-mail, in characters.
const maxPart = 60000

// Split cuts an answer into e-mails: one, unless it is very long.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, maxPart) }
