// Package discord is the Discord channel. A bot connects to Discord's
// gateway and hands direct messages, and messages in servers that
// mention it or reply to it, to the shared delivery pipeline
// (bridge.Pipeline), which stores each, answers it in per-chat order and
// sends the answer in parts of at most 2,000 characters. The slash
// commands (/clear, /status, /help, …) are Discord application commands
// answered through their interaction; approvals are buttons only the
// person asked may press.
//
// The gateway does not deliver again what a process missed while it was
// down, so on every new gateway session the channel reads each known
// conversation's messages after the last one it stored, and puts them
// through the inbox too; the inbox drops what it already holds.
//
// The package is split by concern: discord.go (configuration, Run and
// routes), transport.go (where requests go, rate limits), gateway.go (the
// connection and catching up), receive.go (which messages are for the
// bot, allowlists), commands.go (slash commands), ask.go (buttons),
// send.go, files.go and voice.go.
package discord

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

	"github.com/bwmarrin/discordgo"
	"golang.org/x/time/rate"

	"loadout/backoff"
	"loadout/bridge"
)

// MaxMessage is Discord's limit on one message's text, in characters.
const MaxMessage = 2000

// DefaultAPIURL is Discord's REST API, the version discordgo speaks.
const DefaultAPIURL = "https://discord.com/api/v9/"

// Intents are what the bot asks the gateway for: messages in servers and
// in direct messages, with their text (MESSAGE CONTENT is a privileged
// intent, switched on in the Developer Portal).
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// TokenShape matches a Discord bot token by its form: the bot's id in
// base64, a timestamp, and an HMAC, separated by dots.
const TokenShape = `\b[MNO][\w-]{23,27}\.[\w-]{6}\.[\w-]{27,}`

// Config configures an Adapter; config.yaml's discord section maps onto
// it. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (discord.enabled).
	Enabled bool `yaml:"enabled"`
	// Token is the bot's token from the Developer Portal. Required.
	Token string `yaml:"token" secret:"true"`
	// AllowedUsers are user ids (or @usernames) who may use the bot, in
	// direct messages and in AllowedGuilds. Empty allows nobody.
	AllowedUsers []string `yaml:"allowed_users"`
	// AllowedGuilds are the server ids where the bot answers; empty
	// means none (direct messages only).
	AllowedGuilds []string `yaml:"allowed_guilds"`
	// AllowedRoles are role ids whose members may use the bot in
	// AllowedGuilds, and in direct messages while they are members.
	AllowedRoles []string `yaml:"allowed_roles"`
	// Guilds registers the slash commands in these servers only (at
	// once); empty registers them globally (Discord may take a while to
	// show new global commands).
	Guilds []string `yaml:"guilds"`
	// APIURL is the REST API base; default DefaultAPIURL. For tests and
	// proxies.
	APIURL string `yaml:"api_url" secret:"url"`
	// GatewayURL is the gateway's websocket URL; default the one the API
	// names. For tests and proxies.
	GatewayURL string `yaml:"gateway_url" secret:"url"`
	// Workers bounds the turns running at once; default 8.
	Workers int `yaml:"workers"`
	// TypingInterval is how often "typing…" is renewed; default 8s
	// (Discord shows it for 10s).
	TypingInterval time.Duration `yaml:"typing_interval"`
	// MaxBackoff caps the wait between attempts to reach the gateway;
	// default 1m.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// SendPerChannelSecond paces the bot's messages in one channel by
	// Discord's limit of five every five seconds; zero means 1, a
	// negative value turns pacing off.
	SendPerChannelSecond float64 `yaml:"send_per_channel_second"`
	// Stream shows an answer while the model writes it: one message,
	// edited as the text grows (at most once a second), then replaced by
	// the answer. Default off.
	Stream bool `yaml:"stream"`

	// sleep waits out rate limits and backoffs; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// Kind declares the channel for cmd's list of channels.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "discord",
		Enabled: func(c Config) bool { return c.Enabled },
		Allowed: func(c Config) []string { return c.AllowedUsers },
		Shapes:  []string{TokenShape},
		Describe: func(c Config) string {
			if len(c.Guilds) > 0 {
				return "discord (gateway, commands in " + plural(len(c.Guilds), "server") + ")"
			}
			return "discord (gateway)"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			st, ok := env.Store.(Store)
			if !ok {
				return nil, errors.New("discord: the channel keeps each conversation's cursor in the store, and this store keeps none")
			}
			c.Delivery = env.Delivery
			return New(c, env.Router, st), nil
		},
	})
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Adapter is the Discord channel. Create it with New (which does no I/O)
// and run it once with Run.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	store  Store
	pipe   *bridge.Pipeline
	api    *discordgo.Session
	allow  *bridge.Allowlist
	guilds map[string]bool
	roles  map[string]bool
	log    *slog.Logger
	rl     *limits

	mu      sync.Mutex
	ready   bool   // the pipeline is started
	self    string // the bot's user id, once known
	name    string // the bot's username
	appID   string // the application's id, from READY
	cursors *cursors
	// sessions counts the gateway's READY events; each is a new session
	// after which what was missed is read back.
	sessions chan struct{}
	down     chan struct{} // the connection dropped
	runCtx   context.Context
	// gate holds a new session's messages until what it missed is read
	// back; nil when open.
	gate chan struct{}
	// closing is set once the gateway is being closed: no event starts
	// work then. events are the interactions being handled.
	closing bool
	events  sync.WaitGroup
}

// New returns an adapter that answers through router and keeps its
// inbox and cursors in st. It makes no connection: Run does.
func New(cfg Config, router *bridge.Router, st Store) *Adapter {
	cfg.APIURL = cmp.Or(cfg.APIURL, DefaultAPIURL)
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	cfg.Delivery.Fill(&http.Client{Timeout: 60 * time.Second})
	if cfg.TypingInterval <= 0 {
		cfg.TypingInterval = 8 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.sleep == nil {
		cfg.sleep = backoff.Sleep
	}
	log := cfg.Logger.With("channel", "discord")
	a := &Adapter{
		cfg: cfg, router: router, store: st, log: log,
		allow: bridge.NewAllowlist(cfg.AllowedUsers).Keep(st, "discord"), guilds: set(cfg.AllowedGuilds), roles: set(cfg.AllowedRoles),
		sessions: make(chan struct{}, 1), down: make(chan struct{}, 1),
		cursors: newCursors(st),
	}
	a.rl = &limits{sleep: cfg.sleep, log: log}
	a.api = a.session()
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "discord", Inbox: st, Handler: router, Outlet: a, Workers: cfg.Workers, Pacing: pacing(cfg), Stream: cfg.Stream,
	}))
	return a
}

func set(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			m[id] = true
		}
	}
	return m
}

// session is the discordgo session, its requests sent where the config
// says, its own retries and reconnections off: the adapter waits out
// rate limits (transport.go) and reconnects (gateway.go) itself, within
// Run's life.
func (a *Adapter) session() *discordgo.Session {
	s, _ := discordgo.New("Bot " + a.cfg.Token) // New fails never
	s.Client = &http.Client{Transport: &transport{a: a, base: a.cfg.HTTPClient}, Timeout: a.cfg.HTTPClient.Timeout}
	s.ShouldReconnectOnError = false
	s.ShouldRetryOnRateLimit = false
	s.StateEnabled = false
	s.SyncEvents = true
	s.MaxRestRetries = 0
	s.Identify.Intents = Intents
	s.LogLevel = -1
	s.AddHandler(a.onReady)
	s.AddHandler(a.onResumed)
	s.AddHandler(a.onDisconnect)
	s.AddHandler(a.onMessage)
	s.AddHandler(a.onInteraction)
	return s
}

// pacing is Discord's limit on messages in a channel, as configured.
func pacing(cfg Config) bridge.Pacing {
	per := cfg.SendPerChannelSecond
	switch {
	case per < 0:
		return bridge.Pacing{}
	case per == 0:
		per = 1
	}
	return bridge.Pacing{Global: 40, GlobalBurst: 10, PerChat: func(rt any) (string, rate.Limit, int) {
		r, ok := rt.(route)
		if !ok {
			return "", 0, 0
		}
		return r.Channel, rate.Limit(per), 5
	}}
}

var _ bridge.Channel = (*Adapter)(nil)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "discord" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Ready reports whether the bot's token was accepted and it sends.
func (a *Adapter) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

// Invite says where the person's direct messages with the bot are.
func (a *Adapter) Invite(command string) string {
	a.mu.Lock()
	name := a.name
	a.mu.Unlock()
	if name != "" {
		return "Send me (" + name + ") a direct message with /" + command + " there."
	}
	return "Send me a direct message with /" + command + " there."
}

// Run checks the token, resumes messages left unfinished before a
// restart, then keeps a gateway connection until ctx is cancelled,
// reading back what was missed on each new session. It returns nil after
// a cancel, once its goroutines are done and running turns had the
// shutdown grace, and an error only when Discord rejects the token. An
// unreachable Discord is retried with backoff.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if a.allow.Len() == 0 && len(a.roles) == 0 {
		a.log.Warn("discord.allowed_users and discord.allowed_roles are empty: the bot will refuse everyone; add your user id")
	}
	if err := a.identify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// The cursors, and when the channel first ran, are read before the
	// gateway says anything (and again later, if this fails).
	if err := a.cursors.load(ctx); err != nil && ctx.Err() == nil {
		a.log.Warn("discord: cannot read the conversations' cursors yet", "err", err)
	}
	if err := a.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	a.mu.Lock()
	a.ready = true
	a.mu.Unlock()
	// Every process answers and sends; the gateway is one process's at a
	// time where several share the database.
	a.log.Info("discord channel ready")
	return a.cfg.Exclusive.Do(ctx, "discord gateway", a.gateway)
}

// identify learns the bot's user from the API, which checks the token.
// While Discord is unreachable it keeps trying; a 401 stops it.
func (a *Adapter) identify(ctx context.Context) error {
	var me *discordgo.User
	err := a.policy().Do(ctx, func(err error) (bool, time.Duration) {
		return !rejected(err), 0
	}, func(ctx context.Context) error {
		var err error
		me, err = a.api.User("@me", discordgo.WithContext(ctx))
		if err != nil && ctx.Err() == nil && !rejected(err) {
			a.log.Warn("discord is not reachable yet; retrying", "err", err)
		}
		return err
	})
	if err != nil {
		if rejected(err) {
			return fmt.Errorf("discord rejected discord.token (401 Unauthorized): check discord.token (a bot token from the Developer Portal's Bot page)")
		}
		return err
	}
	a.mu.Lock()
	a.self, a.name = me.ID, me.Username
	a.mu.Unlock()
	a.log.Info("discord bot identified", "user", me.Username, "user_id", me.ID)
	return nil
}

// rejected reports a request refused for its token.
func rejected(err error) bool {
	if errors.Is(err, discordgo.ErrUnauthorized) {
		return true
	}
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized
}

// policy is the backoff for reaching Discord again.
func (a *Adapter) policy() backoff.Policy {
	return backoff.Policy{Initial: time.Second, Max: a.cfg.MaxBackoff, Jitter: 0.2, Sleep: a.cfg.sleep}
}

// botUser is the bot's user id, once known.
func (a *Adapter) botUser() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.self
}

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	// Channel is the channel, thread or direct message.
	Channel string `json:"channel"`
	// Guild is the server, "" for a direct message.
	Guild string `json:"guild,omitempty"`
	// Reply is the person's message the answer replies to (in servers).
	Reply string `json:"reply,omitempty"`
	// Interaction answers a slash command: its application, id and
	// token (valid 15 minutes), and whether only the person sees it.
	App       string `json:"app,omitempty"`
	Token     string `json:"token,omitempty"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
}

// routes keeps routes in the inbox.
var routes = bridge.JSONRoute[route]{Channel: "discord"}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) { return routes.Read(raw) }

func asRoute(rt any) (route, error) { return routes.Of(rt) }

func (r route) encode() []byte { return routes.Encode(r) }

// dm is the guild part of a direct message's chat key, as in Discord's
// own links (discord.com/channels/@me/<channel>).
const dm = "@me"

// chatKey is a conversation's key: "discord:<guild>:<channel>", the
// guild "@me" for a direct message. A thread is a channel of its own,
// so it has its own key and session.
func chatKey(guild, channel string) string { return "discord:" + cmp.Or(guild, dm) + ":" + channel }

// routeOf is where messages to the conversation chatKey names go.
func routeOf(key string) (route, error) {
	parts := strings.Split(key, ":")
	if len(parts) != 3 || parts[0] != "discord" || parts[1] == "" || parts[2] == "" {
		return route{}, fmt.Errorf("discord: %q is not a Discord conversation", key)
	}
	r := route{Channel: parts[2]}
	if parts[1] != dm {
		r.Guild = parts[1]
	}
	return r, nil
}

// Route is where messages to the conversation chatKey names go.
func (a *Adapter) Route(key string) ([]byte, error) {
	r, err := routeOf(key)
	if err != nil {
		return nil, err
	}
	return r.encode(), nil
}

// Private reports whether chatKey is a direct message.
func (a *Adapter) Private(key string) bool {
	r, err := routeOf(key)
	return err == nil && r.Guild == ""
}
