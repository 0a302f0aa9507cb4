// Package whatsapp is the WhatsApp channel, through Meta's official
// WhatsApp Business Cloud API over plain HTTP. Meta calls the channel's
// webhook (on the process's HTTP server) with each message a person
// sends; every request is checked against its X-Hub-Signature-256 before
// anything in it is read, and each message is stored in the inbox before
// the webhook answers 200, so a message WhatsApp delivers again is
// answered once. Answers go out through the Graph API's messages
// endpoint, with WhatsApp's own formatting, in parts of at most 4,096
// characters; approvals are interactive reply buttons only the person
// asked may press.
//
// WhatsApp lets a business write freely to a person only within 24 hours
// of that person's last message (the customer-service window). The
// channel keeps each chat's window in the store, so replicas agree:
// free text that falls outside it is held, logged, and given to the
// person the next time they write; the operator may name an approved
// template (whatsapp.reengage_template) that is sent instead to invite
// them back.
//
// The package is split by concern: whatsapp.go (configuration, Run,
// routes), graph.go (Graph API calls and retries), webhook.go (the
// handshake, signatures, payloads), receive.go (which messages are for
// the bot, allowlist), send.go and format.go, ask.go (buttons), files.go
// and voice.go, window.go (the 24-hour window and the record of sent
// parts and their statuses).
package whatsapp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"loadout/backoff"
	"loadout/bridge"
)

// DefaultAPIURL is the Graph API, at the version the channel is written
// and tested against: pinned, so that a new version's changes reach a
// deployment only when the operator moves whatsapp.api_url.
const DefaultAPIURL = "https://graph.facebook.com/v24.0/"

// DefaultWebhookPath is where the webhook is served unless configured.
const DefaultWebhookPath = "/whatsapp/webhook"

// MaxMessage is WhatsApp's limit on one text message's body, in
// characters.
const MaxMessage = 4096

// MaxBody caps a webhook request: Meta's notifications are documented to
// stay under 3 MB.
const MaxBody = 3 << 20

// Window is WhatsApp's customer-service window: how long after a
// person's last message a business may send them free text.
const Window = 24 * time.Hour

// TokenShape matches a Meta access token by its form: "EAA" and a long
// run of letters and digits.
const TokenShape = `\bEAA[A-Za-z0-9]{20,}`

// Config configures an Adapter; config.yaml's whatsapp section maps onto
// it. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (whatsapp.enabled).
	Enabled bool `yaml:"enabled"`
	// AccessToken calls the Graph API: a system user's permanent token
	// (or the temporary one of the App Dashboard, for a first try).
	AccessToken string `yaml:"access_token" secret:"true"`
	// PhoneNumberID is the business number's id (not the number itself),
	// from WhatsApp → API Setup.
	PhoneNumberID string `yaml:"phone_number_id"`
	// AppSecret is the Meta app's secret, which signs every webhook
	// request (X-Hub-Signature-256).
	AppSecret string `yaml:"app_secret" secret:"true"`
	// VerifyToken is the string the webhook's GET handshake must carry,
	// as entered in the App Dashboard.
	VerifyToken string `yaml:"verify_token" secret:"true"`
	// WebhookPath is where the webhook is served on http.listen; default
	// DefaultWebhookPath.
	WebhookPath string `yaml:"webhook_path"`
	// APIURL is the Graph API base with its version; default
	// DefaultAPIURL. For tests and proxies.
	APIURL string `yaml:"api_url" secret:"url"`
	// AllowedNumbers are the phone numbers (E.164, "+15551234567"; any
	// spaces, dashes and brackets are ignored) that may use the bot.
	// Empty allows nobody.
	AllowedNumbers []string `yaml:"allowed_numbers"`
	// ReengageTemplate is an approved message template ("name", or
	// "name:language" such as "loadout_back:en_US"; default language
	// en_US) sent, once, when an answer cannot go out because the
	// 24-hour window is closed; empty sends none.
	ReengageTemplate string `yaml:"reengage_template"`

	// sleep waits out retries; now is the clock; maxMedia is MaxMedia;
	// unpaced lifts the pacing. Tests set them.
	sleep    func(ctx context.Context, d time.Duration) error
	now      func() time.Time
	maxMedia int64
	unpaced  bool
}

// Kind declares the channel for cmd's list of channels: the section
// whatsapp (whose three secrets its Config declares), and the access
// token's shape.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "whatsapp",
		Enabled: func(c Config) bool { return c.Enabled },
		Allowed: func(c Config) []string { return c.AllowedNumbers },
		Shapes:  []string{TokenShape},
		Describe: func(c Config) string {
			return "whatsapp (Cloud API webhook at " + cmp.Or(c.WebhookPath, DefaultWebhookPath) + ")"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			st, ok := env.Store.(Store)
			if !ok {
				return nil, errors.New("whatsapp: the channel keeps the messages held outside the 24-hour window in the store, and this store keeps none")
			}
			c.Delivery = env.Delivery
			return New(c, env.Router, st), nil
		},
	})
}

// Adapter is the WhatsApp channel. Create it with New (which does no
// I/O), mount it (Mount) and run it once with Run.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	store  Store
	pipe   *bridge.Pipeline
	allow  map[string]bool
	log    *slog.Logger
	api    *graph
	// refusals remembers the numbers already told they are not allowed.
	refusals *bridge.Allowlist

	mu    sync.Mutex
	ready bool
	// chats serialise, within this process, the changes to one chat's
	// small states (its window, held messages, record of sent parts).
	chats map[string]*chatLock
}

type chatLock struct {
	mu   sync.Mutex
	refs int
}

// New returns an adapter that answers through router and keeps its
// inbox and the chats' windows in st. It makes no connection: Run does.
func New(cfg Config, router *bridge.Router, st Store) *Adapter {
	cfg.APIURL = cmp.Or(cfg.APIURL, DefaultAPIURL)
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	cfg.WebhookPath = cmp.Or(cfg.WebhookPath, DefaultWebhookPath)
	cfg.Delivery.Fill(&http.Client{Timeout: 60 * time.Second})
	if cfg.sleep == nil {
		cfg.sleep = backoff.Sleep
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.maxMedia <= 0 {
		cfg.maxMedia = MaxMedia
	}
	log := cfg.Logger.With("channel", "whatsapp")
	a := &Adapter{cfg: cfg, router: router, store: st, log: log, allow: map[string]bool{},
		refusals: bridge.NewAllowlist(nil), chats: map[string]*chatLock{}}
	for _, n := range cfg.AllowedNumbers {
		if d := Digits(n); d != "" {
			a.allow[d] = true
		}
	}
	a.api = &graph{base: cfg.APIURL, token: cfg.AccessToken, phone: cfg.PhoneNumberID, client: cfg.HTTPClient,
		sleep: cfg.sleep, log: log, observer: cfg.Observer}
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "whatsapp", Inbox: st, Handler: router, Outlet: a, Pacing: pacing(cfg.unpaced),
	}))
	return a
}

// pacing keeps within WhatsApp's published limits: 80 messages a second
// for a business number, and to one person about one every six seconds
// with bursts of up to 45 (the "pair rate limit").
func pacing(off bool) bridge.Pacing {
	if off {
		return bridge.Pacing{}
	}
	return bridge.Pacing{Global: 80, GlobalBurst: 80, PerChat: func(rt any) (string, rate.Limit, int) {
		r, ok := rt.(route)
		if !ok {
			return "", 0, 0
		}
		return r.To, rate.Every(6 * time.Second), 45
	}}
}

var _ bridge.Channel = (*Adapter)(nil)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "whatsapp" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Ready reports whether the Graph API accepted the access token and the
// channel sends.
func (a *Adapter) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

// Invite says where the person's chat with the business number is: every
// WhatsApp chat with it is private.
func (a *Adapter) Invite(command string) string {
	return "Send /" + command + " in your WhatsApp chat with me."
}

// Run checks the access token and the number, resumes messages left
// unfinished before a restart, then takes the webhook's messages until
// ctx is cancelled. It returns nil after a cancel, once running turns
// had the shutdown grace, and an error only when Meta rejects the token
// or the phone number id. An unreachable Graph API is retried with
// backoff.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if len(a.allow) == 0 {
		a.log.Warn("whatsapp.allowed_numbers is empty: everybody is refused; add your number (e.g. +15551234567)")
	}
	if err := a.api.identify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := a.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	a.mu.Lock()
	a.ready = true
	a.mu.Unlock()
	a.log.Info("whatsapp webhook ready", "path", a.cfg.WebhookPath)
	<-ctx.Done()
	return nil
}

// Mount serves the webhook (GET for the handshake, POST for
// notifications) on the process's HTTP server. A path another endpoint
// holds already is logged, and the webhook not served.
func (a *Adapter) Mount(mux *http.ServeMux) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("whatsapp: whatsapp.webhook_path is taken by another endpoint, so the webhook is not served; choose another path",
				"path", a.cfg.WebhookPath, "err", fmt.Sprint(r))
		}
	}()
	mux.Handle("GET "+a.cfg.WebhookPath, a)
	mux.Handle("POST "+a.cfg.WebhookPath, a)
}

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	// To is the person's number, in digits.
	To string `json:"to"`
	// Msg is the person's message being answered: it is marked read and
	// shows "typing…".
	Msg string `json:"msg,omitempty"`
	// At is when the person wrote that message (Unix seconds): the
	// customer-service window runs 24 hours from it.
	At int64 `json:"at,omitempty"`
}

// routes keeps routes in the inbox.
var routes = bridge.JSONRoute[route]{Channel: "whatsapp"}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) { return routes.Read(raw) }

func asRoute(rt any) (route, error) { return routes.Of(rt) }

func (r route) encode() []byte { return routes.Encode(r) }

// chatKey is a person's chat: "whatsapp:<digits>".
func chatKey(number string) string { return "whatsapp:" + number }

// Admits reports whether whatsapp.allowed_numbers lets in the person
// with this key (their chat's: "whatsapp:15551234567") now
// (bridge.Admitter).
func (a *Adapter) Admits(_ context.Context, userKey string) (bool, error) {
	n, ok := strings.CutPrefix(userKey, "whatsapp:")
	return ok && n != "" && a.allow[n], nil
}

var _ bridge.Admitter = (*Adapter)(nil)

// Route is where messages to the chat chatKey names go.
func (a *Adapter) Route(key string) ([]byte, error) {
	n, ok := strings.CutPrefix(key, "whatsapp:")
	if !ok || n == "" || Digits(n) != n {
		return nil, errNotAChat(key)
	}
	return route{To: n}.encode(), nil
}

// Private reports whether chatKey is a chat of this channel: every
// WhatsApp chat with a business number is one person's.
func (a *Adapter) Private(key string) bool {
	_, err := a.Route(key)
	return err == nil
}

// lock holds chat's small states for the caller until unlock.
func (a *Adapter) lock(chat string) (unlock func()) {
	a.mu.Lock()
	l := a.chats[chat]
	if l == nil {
		l = &chatLock{}
		a.chats[chat] = l
	}
	l.refs++
	a.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		a.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(a.chats, chat)
		}
		a.mu.Unlock()
	}
}

func errNotAChat(key string) error {
	return fmt.Errorf("whatsapp: %q is not a WhatsApp chat", key)
}
