// Package signal is the Signal channel, through signal-cli's JSON-RPC
// daemon over plain HTTP. loadout never runs signal-cli: the operator runs
// it for the bot's number as a daemon with --http and
// --receive-mode=manual, and the channel calls its JSON-RPC endpoint
// (POST <rpc_url>/api/v1/rpc).
//
// signal-cli hands each message it takes from the Signal server to its
// client once and keeps no copy, so the channel takes them one at a time
// with the receive method: in manual mode the daemon takes nothing from
// the server between calls, so what arrives while loadout is down waits
// on the Signal server, and each message a call returns is stored in the
// inbox before the next call is made. A stop lets the call under way
// finish and stores what it brought.
//
// Direct messages and groups are chats (a group's message counts when it
// mentions the bot or quotes it); people are allowed by number
// (allowed_numbers, E.164) or by their Signal account id
// (allowed_uuids). Files come in through getAttachment and go out as
// data URIs; audio goes through the voice path. A question that waits
// for approval is a message of its own that the person asked answers
// with a reaction (👍 approve, 👎 deny, ✅ always allow).
//
// The package is split by concern: signal.go (configuration, Run,
// routes), rpc.go (JSON-RPC calls and retries), receive.go (which
// envelopes are for the bot, allow-list, groups), send.go (parts,
// typing, voice), ask.go (questions and reactions), files.go and
// check.go (the section's checks).
package signal

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"loadout/backoff"
	"loadout/bridge"
)

// MaxMessage is the longest part sent, in characters: Signal shows a
// long text as a "read more" attachment past about 2,000.
const MaxMessage = 2000

// DefaultRPCURL is where signal-cli's daemon serves HTTP unless
// configured (its --http default).
const DefaultRPCURL = "http://127.0.0.1:8080"

// DefaultPollTimeout is how long one receive call waits for a message.
const DefaultPollTimeout = 5 * time.Second

// Config configures an Adapter; config.yaml's signal section maps onto
// it. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (signal.enabled).
	Enabled bool `yaml:"enabled"`
	// RPCURL is where signal-cli's daemon serves HTTP (its --http
	// address); default DefaultRPCURL. A proxy in front of it
	// may carry credentials in the URL: it is kept out of logs.
	RPCURL string `yaml:"rpc_url" secret:"url"`
	// Account is the bot's number, E.164 ("+15551234567"): how the
	// channel knows the bot in mentions, quotes and reactions.
	Account string `yaml:"account"`
	// AllowedNumbers are the numbers (E.164; spaces, dashes and brackets
	// are ignored) of the people who may use the bot.
	AllowedNumbers []string `yaml:"allowed_numbers"`
	// AllowedUUIDs are Signal account ids (ACI, as the log shows a
	// refused sender's) of people who may use the bot: for those whose
	// number Signal does not share with the bot.
	AllowedUUIDs []string `yaml:"allowed_uuids"`
	// PollTimeout is how long one receive call waits for a message;
	// default DefaultPollTimeout.
	PollTimeout time.Duration `yaml:"poll_timeout"`
	// SendPerSecond paces the bot's messages; default 1 a second in a
	// chat and 5 in all. A negative value turns pacing off.
	SendPerSecond float64 `yaml:"send_per_second"`
	// TypingInterval is how often "typing…" is renewed; default 10s
	// (Signal shows it for 15).
	TypingInterval time.Duration `yaml:"typing_interval"`

	// sleep waits out retries; tests set it.
	sleep func(ctx context.Context, d time.Duration) error
}

// Kind declares the channel for cmd's list of channels: the section
// signal, whose rpc_url may carry credentials (its Config declares it),
// and whom it allows (numbers, then account ids). signal-cli needs no
// token of its own, so there is no shape to redact.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "signal",
		Enabled: func(c Config) bool { return c.Enabled },
		Allowed: func(c Config) []string { return slices.Concat(c.AllowedNumbers, c.AllowedUUIDs) },
		Describe: func(c Config) string {
			return "signal (signal-cli JSON-RPC)"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store), nil
		},
	})
}

// Adapter is the Signal channel. Create it with New (which does no I/O)
// and run it once with Run.
type Adapter struct {
	cfg     Config
	router  *bridge.Router
	store   bridge.Store
	pipe    *bridge.Pipeline
	allow   *bridge.Allowlist
	account string // the bot's number, E.164
	log     *slog.Logger
	rpc     *client

	mu    sync.Mutex
	ready bool
	// asking is held by Ask from sending a question until it is kept,
	// and taken by a reaction before it looks the question up.
	asking sync.RWMutex
}

// New returns an adapter that answers through router and keeps its
// inbox and its questions in st. It makes no connection: Run does.
func New(cfg Config, router *bridge.Router, st bridge.Store) *Adapter {
	cfg.RPCURL = strings.TrimRight(cmp.Or(cfg.RPCURL, DefaultRPCURL), "/")
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = DefaultPollTimeout
	}
	if cfg.TypingInterval <= 0 {
		cfg.TypingInterval = 10 * time.Second
	}
	cfg.Delivery.Fill(&http.Client{})
	if cfg.sleep == nil {
		cfg.sleep = backoff.Sleep
	}
	log := cfg.Logger.With("channel", "signal")
	// The list's ids are account ids; its names are numbers, so that
	// Admits knows a person let in by their number by their id.
	var entries []string
	for _, n := range cfg.AllowedNumbers {
		if e := E164(n); e != "" {
			entries = append(entries, "@"+e)
		}
	}
	for _, u := range cfg.AllowedUUIDs {
		entries = append(entries, strings.ToLower(strings.TrimSpace(u)))
	}
	a := &Adapter{cfg: cfg, router: router, store: st, log: log, account: E164(cfg.Account),
		allow: bridge.NewAllowlist(entries).Keep(st, "signal")}
	a.rpc = &client{url: cfg.RPCURL + "/api/v1/rpc", http: cfg.HTTPClient, sleep: cfg.sleep, log: log, observer: cfg.Observer}
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "signal", Inbox: st, Handler: router, Outlet: a, Pacing: pacing(cfg.SendPerSecond),
	}))
	return a
}

// pacing keeps to about one message a second in a chat and perSecond
// (default 5) in all: Signal rate-limits bursts from one account.
func pacing(perSecond float64) bridge.Pacing {
	if perSecond < 0 {
		return bridge.Pacing{}
	}
	if perSecond == 0 {
		perSecond = 5
	}
	return bridge.Pacing{Global: rate.Limit(perSecond), GlobalBurst: int(max(1, perSecond)),
		PerChat: func(rt any) (string, rate.Limit, int) {
			r, ok := rt.(route)
			if !ok {
				return "", 0, 0
			}
			return r.To + r.Group, 1, 3
		}}
}

var (
	_ bridge.Channel  = (*Adapter)(nil)
	_ bridge.Admitter = (*Adapter)(nil)
)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "signal" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Ready reports whether signal-cli answered and the channel takes
// messages.
func (a *Adapter) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

// Invite says where the person's private chat with the bot is.
func (a *Adapter) Invite(command string) string {
	return "Send /" + command + " in a direct Signal message to me (" + a.account + ")."
}

// Run checks that signal-cli answers, resumes messages left unfinished
// before a restart, then takes messages until ctx is cancelled. It
// returns nil after a cancel, once the receive call under way has ended
// (what it brought is stored) and running turns had the shutdown grace.
// An unreachable daemon is retried with backoff.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if a.allow.Len() == 0 {
		a.log.Warn("signal.allowed_numbers and signal.allowed_uuids are empty: everybody is refused; add your number (e.g. +15551234567)")
	}
	var version string
	err := backoff.Policy{Initial: time.Second, Max: time.Minute, Sleep: a.cfg.sleep}.Do(ctx, backoff.Always, func(ctx context.Context) error {
		var v struct {
			Version string `json:"version"`
		}
		err := a.rpc.call(ctx, "version", nil, &v)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("signal: cannot reach signal-cli's daemon at signal.rpc_url, retrying (is it running with --http?)", "err", err)
		}
		version = v.Version
		return err
	})
	if err != nil {
		return nil // ctx done
	}
	if err := a.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	a.mu.Lock()
	a.ready = true
	a.mu.Unlock()
	a.log.Info("signal: connected to signal-cli", "version", version, "account", a.account)
	return a.cfg.Exclusive.Do(ctx, "signal receiving", func(ctx context.Context) error {
		a.receive(ctx)
		return nil
	})
}

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	// To is the person's account id (or number) in a direct chat;
	// Group is the group's id in a group. One of the two is set.
	To    string `json:"to,omitempty"`
	Group string `json:"group,omitempty"`
	// QuoteTS and QuoteAuthor name the person's message an answer in a
	// group quotes: its timestamp and its author.
	QuoteTS     int64  `json:"quote_ts,omitempty"`
	QuoteAuthor string `json:"quote_author,omitempty"`
}

// routes keeps routes in the inbox.
var routes = bridge.JSONRoute[route]{Channel: "signal"}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) { return routes.Read(raw) }

func asRoute(rt any) (route, error) { return routes.Of(rt) }

// target is the recipient of a call to signal-cli: recipient or groupId.
func (r route) target(params map[string]any) map[string]any {
	if r.Group != "" {
		params["groupId"] = r.Group
	} else {
		params["recipient"] = []string{r.To}
	}
	return params
}

// Chat keys: "signal:<account id>" is a person's direct chat,
// "signal:group:<group id>" a group's.
const groupPrefix = "signal:group:"

func personKey(id string) string { return "signal:" + id }

// Route is where messages to the chat chatKey names go.
func (a *Adapter) Route(key string) ([]byte, error) {
	if g, ok := strings.CutPrefix(key, groupPrefix); ok && g != "" {
		return routes.Encode(route{Group: g}), nil
	}
	if id, ok := strings.CutPrefix(key, "signal:"); ok && id != "" && !strings.HasPrefix(id, "group:") {
		return routes.Encode(route{To: id}), nil
	}
	return nil, fmt.Errorf("signal: %q is not a Signal chat", key)
}

// Private reports whether chatKey is a person's direct chat.
func (a *Adapter) Private(key string) bool {
	_, err := a.Route(key)
	return err == nil && !strings.HasPrefix(key, groupPrefix)
}

// Admits reports whether the allow-list lets in the person with this
// key ("signal:<account id>") now: listed by account id, or by the
// number they last wrote with (bridge.Admitter).
func (a *Adapter) Admits(ctx context.Context, userKey string) (bool, error) {
	id, ok := strings.CutPrefix(userKey, "signal:")
	if !ok || id == "" || strings.HasPrefix(id, "group:") {
		return false, nil
	}
	return a.allow.Admits(ctx, id)
}
