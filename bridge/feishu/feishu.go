// Package feishu is the Feishu channel (and Lark's, its international
// twin: the same platform at another address). Feishu calls the
// channel's callback, on the process's HTTP server, with each event of
// the app's event subscription: a message sent to the bot (a private
// chat, or a group message that mentions it) and a press of a card's
// button. Every callback is encrypted with the app's encrypt key
// (AES-256-CBC under the key's SHA-256) and signed (X-Lark-Signature,
// the SHA-256 of timestamp, nonce, encrypt key and body); the signature
// is checked before anything in the body is read, then the event's
// verification token. Each message is stored in the inbox before the
// callback answers 200, so an event Feishu delivers again (it retries
// what is not answered within 3 seconds) is answered once: its
// header.event_id is the inbox's key.
//
// Answers go out through the messaging API (im/v1/messages) as rich
// text of Markdown, with a tenant_access_token fetched with the app's
// id and secret and kept until it expires. Approvals are interactive
// cards whose buttons only the person asked may press; files people
// send are downloaded into the chat's workspace, and files the bot
// sends are uploaded and sent as file messages.
//
// The event scheme's two primitives (the signature and the decryption)
// are the official SDK's (github.com/larksuite/oapi-sdk-go/v3/event);
// the few API calls are plain HTTP, as the SDK's client and its
// messaging service would add half a megabyte to the binary.
//
// The package is split by concern: feishu.go (configuration, Run,
// routes), check.go (the section's checks), api.go (the open-apis calls,
// the token and retries), callback.go (signatures, decryption, the URL
// verification, the events), receive.go (which messages are for the
// bot, the allow-list, their text), send.go, ask.go (cards) and
// files.go.
package feishu

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"loadout/backoff"
	"loadout/bridge"
)

// DefaultAPIURL is Feishu's open platform; Lark's is LarkAPIURL.
const DefaultAPIURL = "https://open.feishu.cn"

// LarkAPIURL is Lark's open platform, for a Lark tenant's app.
const LarkAPIURL = "https://open.larksuite.com"

// DefaultCallbackPath is where the callback is served unless configured.
const DefaultCallbackPath = "/feishu/events"

// MaxBody caps a callback request: events are a few kilobytes.
const MaxBody = 1 << 20

// MaxEventAge is how old an event may be (by its header's create_time)
// and still be taken. Feishu retries an event for about seven hours;
// an older one is a replay, which the inbox, keeping events for a day,
// might no longer recognise.
const MaxEventAge = 12 * time.Hour

// TokenShape matches a tenant (t-…) or user (u-…) access token by its
// form.
const TokenShape = `\b[tu]-[A-Za-z0-9]{30,}`

// Config configures an Adapter; config.yaml's feishu section maps onto
// it. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (feishu.enabled).
	Enabled bool `yaml:"enabled"`
	// AppID is the app's id ("cli_…"), from the developer console's
	// Credentials & Basic Info.
	AppID string `yaml:"app_id"`
	// AppSecret is the app's secret, which fetches its access token.
	AppSecret string `yaml:"app_secret" secret:"true"`
	// VerificationToken is the event subscription's verification token,
	// which every event carries (Events & Callbacks → Encryption
	// Strategy).
	VerificationToken string `yaml:"verification_token" secret:"true"`
	// EncryptKey is the event subscription's encrypt key, with which
	// Feishu encrypts and signs every callback. Required: an unsigned
	// event is never taken.
	EncryptKey string `yaml:"encrypt_key" secret:"true"`
	// AllowedUsers are the open ids ("ou_…") of the people who may use
	// the bot; the log names the open id of everyone refused. Empty
	// allows nobody.
	AllowedUsers []string `yaml:"allowed_users"`
	// APIURL is the open platform's address; default DefaultAPIURL
	// (LarkAPIURL for Lark).
	APIURL string `yaml:"api_url" secret:"url"`
	// CallbackPath is where the callback is served on http.listen;
	// default DefaultCallbackPath.
	CallbackPath string `yaml:"callback_path"`
	// Stream shows an answer while the model writes it: one message,
	// edited as the text grows (Feishu lets a message be edited 20
	// times).
	Stream bool `yaml:"stream"`

	// sleep waits out retries; now is the clock; maxFile is MaxFile.
	// Tests set them.
	sleep   func(ctx context.Context, d time.Duration) error
	now     func() time.Time
	maxFile int64
}

// Kind declares the channel for cmd's list of channels: the section
// feishu (whose three secrets its Config declares), and the access
// tokens' shape.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "feishu",
		Enabled: func(c Config) bool { return c.Enabled },
		Shapes:  []string{TokenShape},
		Allowed: func(c Config) []string { return c.AllowedUsers },
		Describe: func(c Config) string {
			return "feishu (event callback at " + cmp.Or(c.CallbackPath, DefaultCallbackPath) + ")"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store), nil
		},
	})
}

// Adapter is the Feishu channel. Create it with New (which does no I/O),
// mount it (Mount) and run it once with Run.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	store  bridge.Store
	pipe   *bridge.Pipeline
	allow  *bridge.Allowlist
	log    *slog.Logger
	api    *api

	mu sync.Mutex
	// bot is the bot's own open id, known once Run reached Feishu: a
	// group message is for the bot when it mentions it.
	bot string
	// edits counts the edits of each draft being shown, by message id.
	edits map[string]int
}

// New returns an adapter that answers through router and keeps its
// inbox, and the files waiting for a person's next message, in st. It
// makes no connection: Run does.
func New(cfg Config, router *bridge.Router, st bridge.Store) *Adapter {
	cfg.APIURL = strings.TrimSuffix(cmp.Or(cfg.APIURL, DefaultAPIURL), "/")
	cfg.CallbackPath = cmp.Or(cfg.CallbackPath, DefaultCallbackPath)
	cfg.Delivery.Fill(&http.Client{Timeout: 60 * time.Second})
	if cfg.sleep == nil {
		cfg.sleep = backoff.Sleep
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.maxFile <= 0 {
		cfg.maxFile = MaxFile
	}
	log := cfg.Logger.With("channel", "feishu")
	a := &Adapter{cfg: cfg, router: router, store: st, log: log, allow: bridge.NewAllowlist(cfg.AllowedUsers)}
	a.api = &api{base: cfg.APIURL, appID: cfg.AppID, secret: cfg.AppSecret, client: cfg.HTTPClient,
		sleep: cfg.sleep, now: cfg.now, log: log, observer: cfg.Observer}
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "feishu", Inbox: st, Handler: router, Outlet: a, Stream: cfg.Stream, DraftEvery: draftEvery,
	}))
	return a
}

// draftEvery is how often a draft is edited at most: its 18 edits last
// half a minute of writing.
const draftEvery = 1500 * time.Millisecond

var _ bridge.Channel = (*Adapter)(nil)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "feishu" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Ready reports whether Feishu accepted the app's credentials and the
// channel sends.
func (a *Adapter) Ready() bool { return a.self() != "" }

// self is the bot's open id, "" until Run has reached Feishu.
func (a *Adapter) self() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bot
}

// Invite says where a person's own chat with the bot is.
func (a *Adapter) Invite(command string) string {
	return "Send /" + command + " to me in a private chat (search for the bot's name in Feishu)."
}

// Run fetches the app's access token and the bot's identity, resumes
// messages left unfinished before a restart, then takes the callback's
// events until ctx is cancelled. It returns nil after a cancel, once
// running turns had the shutdown grace, and an error only when Feishu
// rejects the app's credentials. An unreachable Feishu is retried with
// backoff.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if a.allow.Len() == 0 {
		a.log.Warn("feishu.allowed_users is empty: everybody is refused; the log names the open id (ou_…) of each person refused, to add to it")
	}
	bot, err := a.api.identify(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := a.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	a.mu.Lock()
	a.bot = bot
	a.mu.Unlock()
	a.log.Info("feishu callback ready", "path", a.cfg.CallbackPath, "bot_open_id", bot)
	<-ctx.Done()
	return nil
}

// Mount serves the callback on the process's HTTP server. A path another
// endpoint holds already is logged, and the callback not served.
func (a *Adapter) Mount(mux *http.ServeMux) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("feishu: feishu.callback_path is taken by another endpoint, so the callback is not served; choose another path",
				"path", a.cfg.CallbackPath, "err", fmt.Sprint(r))
		}
	}()
	mux.Handle("POST "+a.cfg.CallbackPath, a)
}

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	// To is a person's open id (their private chat with the bot) or a
	// group's chat id; Type says which ("open_id" or "chat_id"), as the
	// messaging API's receive_id_type.
	To   string `json:"to"`
	Type string `json:"type"`
}

// routes keeps routes in the inbox.
var routes = bridge.JSONRoute[route]{Channel: "feishu"}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) { return routes.Read(raw) }

func asRoute(rt any) (route, error) { return routes.Of(rt) }

func (r route) encode() []byte { return routes.Encode(r) }

// Chat keys: a person's private chat with the bot is "feishu:<open id>",
// which is also the person's user key; a group is "feishu:<chat id>".
// Feishu writes open ids "ou_…" and chat ids "oc_…".
const (
	openIDPrefix = "ou_"
	chatIDPrefix = "oc_"
)

// Route is where messages to the chat chatKey names go.
func (a *Adapter) Route(key string) ([]byte, error) {
	id, ok := strings.CutPrefix(key, "feishu:")
	switch {
	case !ok || !plainID(id):
		return nil, fmt.Errorf("feishu: %q is not a Feishu chat", key)
	case strings.HasPrefix(id, openIDPrefix):
		return route{To: id, Type: "open_id"}.encode(), nil
	case strings.HasPrefix(id, chatIDPrefix):
		return route{To: id, Type: "chat_id"}.encode(), nil
	}
	return nil, fmt.Errorf("feishu: %q is not a Feishu chat", key)
}

// plainID reports whether id is one Feishu could have given: letters,
// digits, "_" and "-", at most 128 of them.
func plainID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Private reports whether chatKey is a person's private chat with the
// bot.
func (a *Adapter) Private(key string) bool {
	id, ok := strings.CutPrefix(key, "feishu:")
	return ok && plainID(id) && strings.HasPrefix(id, openIDPrefix)
}

// Admits reports whether feishu.allowed_users lets in the person with
// this key ("feishu:ou_…") now (bridge.Admitter).
func (a *Adapter) Admits(_ context.Context, userKey string) (bool, error) {
	id, ok := strings.CutPrefix(userKey, "feishu:")
	return ok && strings.HasPrefix(id, openIDPrefix) && a.allow.Allowed(id, ""), nil
}

var _ bridge.Admitter = (*Adapter)(nil)
