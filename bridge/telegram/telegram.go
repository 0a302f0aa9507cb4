// Package telegram is the Telegram channel. It receives updates by long
// polling or by webhook and hands them to the shared delivery pipeline
// (bridge.Pipeline), which stores each before it is acknowledged, answers
// through the command router and engine in per-chat order, and sends the
// reply as Telegram HTML in parts that fit Telegram's size limit, resuming
// after a restart at the first unsent part. People not on the allowlist
// get one short refusal.
//
// The package is split by concern: telegram.go (configuration and Run),
// api.go (Bot API calls and retries), poll.go (long polling), webhook.go,
// receive.go (which updates are for the bot) and send.go (formatting,
// splitting, typing, notices).
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"golang.org/x/time/rate"

	"loadout/backoff"
	"loadout/bridge"
)

// Store is the durable state the channel needs: the pipeline's inbox and
// a named value for the update offset. store.DB implements it.
type Store interface {
	bridge.Inbox
	State(ctx context.Context, key string) (string, error)
	SetState(ctx context.Context, key, value string) error
}

// Modes of receiving updates.
const (
	ModePolling = "polling"
	ModeWebhook = "webhook"
)

// MaxMessage is Telegram's limit on one message's text.
const MaxMessage = 4096

// Config configures an Adapter. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (telegram.enabled).
	Enabled bool `yaml:"enabled"`
	// Token is the bot token from BotFather. Required.
	Token string `yaml:"token" secret:"true"`
	// APIEndpoint is the Bot API URL format with two %s (token, method);
	// default tgbotapi.APIEndpoint. Any Bot-API-compatible server works.
	APIEndpoint string `yaml:"api_endpoint" secret:"url"`
	// FileEndpoint is the URL format files are downloaded from, with two
	// %s (token, file path); default api_endpoint's, with /file before
	// /bot.
	FileEndpoint string `yaml:"file_endpoint" secret:"url"`
	// AllowedUsers are numeric user ids and @usernames. Empty allows
	// nobody.
	AllowedUsers []string `yaml:"allowed_users"`
	// Mode is ModePolling (default) or ModeWebhook.
	Mode string `yaml:"mode"`
	// WebhookURL is the public HTTPS URL Telegram posts updates to, and
	// WebhookSecret the token it sends in X-Telegram-Bot-Api-Secret-Token.
	// Both are required in webhook mode; requests without the secret are
	// rejected.
	WebhookURL    string `yaml:"webhook_url" secret:"url"`
	WebhookSecret string `yaml:"webhook_secret" secret:"true"`
	// Workers bounds the turns running at once; default 8.
	Workers int `yaml:"workers"`
	// PollTimeout is the long-poll timeout; default 30s.
	PollTimeout time.Duration `yaml:"poll_timeout"`
	// TypingInterval is how often "typing…" is renewed; default 4s.
	TypingInterval time.Duration `yaml:"typing_interval"`
	// MaxBackoff caps the wait between retries after errors; default 1m.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// SendPerSecond, SendPerChatSecond and SendPerGroupMinute pace the
	// bot's messages by Telegram's published limits: about 30 a second in
	// all, one a second in a chat, 20 a minute in a group. Zero means
	// those defaults; a negative value turns that bound off.
	SendPerSecond      float64 `yaml:"send_per_second"`
	SendPerChatSecond  float64 `yaml:"send_per_chat_second"`
	SendPerGroupMinute float64 `yaml:"send_per_group_minute"`
	// Stream shows an answer while the model writes it: one message,
	// edited as the text grows (at most once a second, within the send
	// limits), then replaced by the formatted answer. Default off.
	Stream bool `yaml:"stream"`
}

// Adapter is the Telegram channel. Run it once; it also serves the webhook
// through ServeHTTP in webhook mode.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	store  Store
	pipe   *bridge.Pipeline
	allow  *bridge.Allowlist
	log    *slog.Logger
	// sleep waits d or until ctx is done; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	bot   *tgbotapi.BotAPI
	ready bool // the pipeline is started

	warnOnce sync.Map // optional methods already reported as failing
}

// New returns an adapter that answers through router and keeps its state
// in st.
func New(cfg Config, router *bridge.Router, st Store) *Adapter {
	if cfg.APIEndpoint == "" {
		cfg.APIEndpoint = tgbotapi.APIEndpoint
	}
	if cfg.FileEndpoint == "" {
		if base, ok := strings.CutSuffix(cfg.APIEndpoint, "/bot%s/%s"); ok {
			cfg.FileEndpoint = base + "/file/bot%s/%s"
		}
	}
	cfg.Delivery.Fill(&http.Client{})
	if cfg.Mode == "" {
		cfg.Mode = ModePolling
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	if cfg.TypingInterval <= 0 {
		cfg.TypingInterval = 4 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	cfg.Logger = cfg.Logger.With("channel", "telegram")
	a := &Adapter{
		cfg: cfg, router: router, store: st, allow: bridge.NewAllowlist(cfg.AllowedUsers).Keep(st, "telegram"),
		log: cfg.Logger, sleep: backoff.Sleep,
	}
	a.pipe = bridge.NewPipeline(cfg.Delivery.Pipeline(bridge.PipelineConfig{
		Channel: "telegram", Inbox: st, Handler: router, Outlet: a, Workers: cfg.Workers, Pacing: pacing(cfg), Stream: cfg.Stream,
	}))
	return a
}

// pacing is Telegram's published limits, as configured.
func pacing(cfg Config) bridge.Pacing {
	rateOf := func(v, def float64, per time.Duration) rate.Limit {
		switch {
		case v < 0:
			return 0
		case v == 0:
			v = def
		}
		return rate.Limit(v / per.Seconds())
	}
	chat := rateOf(cfg.SendPerChatSecond, 1, time.Second)
	group := rateOf(cfg.SendPerGroupMinute, 20, time.Minute)
	return bridge.Pacing{
		Global: rateOf(cfg.SendPerSecond, 30, time.Second), GlobalBurst: 1,
		PerChat: func(route any) (string, rate.Limit, int) {
			r, ok := route.(routeInfo)
			if !ok {
				return "", 0, 0
			}
			key := strconv.FormatInt(r.ChatID, 10)
			if r.ChatID < 0 { // groups and channels
				return key, group, 3
			}
			return key, chat, 1
		},
	}
}

// Ready reports whether the bot has reached the Bot API and is taking
// updates.
func (a *Adapter) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

// UserName is the bot's @username without the @, once Run has reached the
// Bot API; "" before.
func (a *Adapter) UserName() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bot == nil {
		return ""
	}
	return a.bot.Self.UserName
}

var (
	_ bridge.Channel  = (*Adapter)(nil)
	_ bridge.Admitter = (*Adapter)(nil)
)

// Admits reports whether telegram.allowed_users lets in the person with
// this key now: by their id, or by the @username they last wrote with
// (bridge.Admitter).
func (a *Adapter) Admits(ctx context.Context, userKey string) (bool, error) {
	id, ok := strings.CutPrefix(userKey, "telegram:")
	if !ok {
		return false, nil
	}
	return a.allow.Admits(ctx, id)
}

// Invite is a deep link to the private chat with the bot that starts
// with command's first word (/start connect runs /connect google), once
// the bot's name is known.
func (a *Adapter) Invite(command string) string {
	if name := a.UserName(); name != "" {
		word, _, _ := strings.Cut(command, " ")
		return "Open https://t.me/" + name + "?start=" + word + " and press Start."
	}
	return "Open a private chat with me and send /" + command + " there."
}

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "telegram" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Mount serves the webhook at WebhookPath, in webhook mode.
func (a *Adapter) Mount(mux *http.ServeMux) {
	if a.cfg.Mode == ModeWebhook {
		mux.Handle("POST "+a.WebhookPath(), a)
	}
}

// WebhookPath is the path of WebhookURL, where ServeHTTP must be mounted.
func (a *Adapter) WebhookPath() string {
	u, err := url.Parse(a.cfg.WebhookURL)
	if err != nil || u.Path == "" {
		return "/"
	}
	return u.Path
}

// Run connects to the Bot API, resumes messages left unfinished before a
// restart, and receives updates until ctx is cancelled. Then it stops
// taking updates, lets running turns finish for ShutdownGrace, and returns
// nil. Network errors are retried with backoff; Run returns an error only
// when the Bot API rejects the token.
//
// When polling, the first getUpdates goes out beside getMe and the
// resumption: a request needs only the token, and a start used to wait a
// round trip to the Bot API (getMe's) before it asked for updates. What
// that getUpdates brings is taken in only once the bot is connected and
// its pipeline runs (poll); if the token is refused, polling stops and
// Run returns the refusal.
func (a *Adapter) Run(ctx context.Context) error {
	if a.allow.Len() == 0 {
		a.log.Warn("telegram.allowed_users is empty: the bot will refuse everyone; add your numeric user id or @username")
	}
	if a.cfg.Mode == ModeWebhook {
		st := a.start(ctx)
		if st.err != nil || !st.piped {
			return st.err
		}
		defer a.pipe.Stop()
		// The command menu is cosmetic: taking updates does not wait for it.
		var menu sync.WaitGroup
		menu.Go(func() { a.setCommands(ctx) })
		defer menu.Wait()
		a.setWebhook(ctx)
		<-ctx.Done()
		return nil
	}
	a.mu.Lock()
	if a.bot == nil {
		a.bot = a.unverified()
	}
	a.mu.Unlock()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	st := &startup{done: make(chan struct{})}
	var bg sync.WaitGroup
	bg.Go(func() {
		r := a.start(ctx)
		st.err, st.piped = r.err, r.piped
		if st.err != nil {
			stop(st.err) // polling ends: the token is refused
		}
		close(st.done)
		if st.piped && ctx.Err() == nil {
			a.setCommands(ctx) // cosmetic: taking updates does not wait for it
		}
	})
	defer func() {
		bg.Wait()
		if st.piped {
			a.pipe.Stop()
		}
	}()
	err := a.cfg.Exclusive.Do(ctx, "telegram polling", func(ctx context.Context) error {
		a.poll(ctx, st)
		return nil
	})
	<-st.done
	if st.err != nil {
		return st.err
	}
	return err
}

// startup is how a start went: done is closed once it is over, err is
// the token's refusal, piped is set once the pipeline runs (and ready).
type startup struct {
	done  chan struct{}
	err   error
	piped bool
}

// start connects (getMe), then resumes the pipeline and marks the
// channel ready. A refused token is an error; ctx ending is not.
func (a *Adapter) start(ctx context.Context) startup {
	bot, err := a.connect(ctx)
	if err != nil || bot == nil {
		return startup{err: err}
	}
	a.log.Info("telegram bot connected", "username", "@"+bot.Self.UserName, "mode", a.cfg.Mode)
	a.mu.Lock()
	a.bot = bot
	a.mu.Unlock()
	if err := a.pipe.Start(ctx); err != nil {
		return startup{piped: true} // ctx done; Stop still ends what Start began
	}
	a.mu.Lock()
	a.ready = true
	a.mu.Unlock()
	return startup{piped: true}
}

// unverified is the bot before getMe has answered: the token and the
// endpoint, which is all a request needs; its Self is empty.
func (a *Adapter) unverified() *tgbotapi.BotAPI {
	bot := &tgbotapi.BotAPI{Token: a.cfg.Token, Client: a.cfg.HTTPClient, Buffer: 100}
	bot.SetAPIEndpoint(a.cfg.APIEndpoint)
	return bot
}

// connect calls getMe until it succeeds. It returns nil, nil when ctx is
// done first, and an error when the token is rejected.
func (a *Adapter) connect(ctx context.Context) (*tgbotapi.BotAPI, error) {
	var bot *tgbotapi.BotAPI
	err := a.policy(0).Do(ctx, func(err error) (bool, time.Duration) {
		var te *tgbotapi.Error
		return !(errors.As(err, &te) && (te.Code == http.StatusUnauthorized || te.Code == http.StatusNotFound)), 0
	}, func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		var err error
		bot, err = tgbotapi.NewBotAPIWithClient(a.cfg.Token, a.cfg.APIEndpoint, doer{rctx, a.cfg.HTTPClient})
		if err != nil && ctx.Err() == nil {
			a.log.Warn("telegram: cannot reach the Bot API, retrying", "err", err)
		}
		return err
	})
	if ctx.Err() != nil {
		return nil, nil
	}
	var te *tgbotapi.Error
	if errors.As(err, &te) {
		return nil, fmt.Errorf("the Bot API rejected telegram.token (%d %s): check telegram.token (and telegram.api_endpoint if set)", te.Code, te.Message)
	}
	return bot, err
}
