// Package mattermost is the Mattermost channel, through the server's
// REST API v4 and its websocket, over plain HTTP (no SDK: the official
// one's package init and module graph cost more than the few calls the
// channel makes). A bot account listens on the websocket and hands
// direct messages, and posts in channels that mention it, to the shared
// delivery pipeline (bridge.Pipeline), which stores each, answers it in
// per-chat order and sends the answer in parts. In a channel the answer
// goes to the thread of the post (root_id), and each thread is a chat
// of its own. Approvals are message attachment buttons that only the
// person asked may press: Mattermost posts the press to an endpoint the
// channel mounts on the process's HTTP server (mattermost.actions_url),
// and each button's context carries a signature the channel checks,
// since Mattermost does not sign those requests.
//
// The websocket does not deliver what was posted while the process was
// down, so on every connection the channel reads back each of its
// channels' posts after the last one it stored (a cursor per channel in
// the store's small states), through the inbox, which drops what it
// already holds.
//
// The package is split by concern: mattermost.go (configuration, Run,
// routes), check.go, api.go (REST calls, retries), socket.go (the
// websocket and reading back), receive.go (which posts are for the bot,
// the allow-list, files in), send.go (posts, drafts, typing, files out)
// and ask.go (buttons and their endpoint).
package mattermost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"loadout/backoff"
	"loadout/bridge"
)

// DefaultMaxMessage is the longest post a Mattermost server takes (its
// MaxPostSize since 5.0 with the default schema), in characters.
const DefaultMaxMessage = 16383

// DefaultActionsPath is where the buttons' endpoint is served when
// mattermost.actions_url names no path.
const DefaultActionsPath = "/mattermost/actions"

// TokenShape matches a Mattermost access token where it has a
// recognisable form: after "Bearer ", as an access_token parameter, or
// as the websocket challenge's token. A token alone is 26 lowercase
// letters and digits, like every Mattermost id, so it is redacted by its
// value (a declared secret), never by its shape alone.
const TokenShape = `(?i)(?:bearer\s+|access_token=|"token"\s*:\s*")[a-z0-9]{26}\b`

// Config configures an Adapter; config.yaml's mattermost section maps
// onto it. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (mattermost.enabled).
	Enabled bool `yaml:"enabled"`
	// URL is the Mattermost server, such as https://chat.example.com.
	// Required.
	URL string `yaml:"url" secret:"url"`
	// Token is the bot account's access token. Required.
	Token string `yaml:"token" secret:"true"`
	// AllowedUsers are the people who may use the bot: user ids (26
	// letters and digits) or usernames ("ana" or "@ana"). Empty allows
	// nobody.
	AllowedUsers []string `yaml:"allowed_users"`
	// ActionsURL is where Mattermost reaches this process's buttons
	// endpoint (its path is served on http.listen), such as
	// https://loadout.example.com/mattermost/actions. Empty: questions
	// are answered with /approve and /deny, without buttons.
	ActionsURL string `yaml:"actions_url" secret:"url"`
	// Workers bounds the turns running at once; default 8.
	Workers int `yaml:"workers"`
	// TypingInterval is how often "typing…" is renewed; default 4s.
	TypingInterval time.Duration `yaml:"typing_interval"`
	// MaxBackoff caps the wait between attempts to reach the server;
	// default 1m.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// SendPerSecond paces the bot's requests by the server's rate limit
	// (10 a second with bursts of 100 by default, where it is on); zero
	// means 10, a negative value turns pacing off.
	SendPerSecond float64 `yaml:"send_per_second"`
	// MaxMessage is the longest post, in characters; default
	// DefaultMaxMessage (4000 for a server whose database was never
	// migrated past it).
	MaxMessage int `yaml:"max_message"`
	// Stream shows an answer while the model writes it: one post,
	// edited as the text grows, then replaced by the answer. Default off.
	Stream bool `yaml:"stream"`

	// sleep waits out rate limits and backoffs; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// Kind declares the channel for cmd's list of channels.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "mattermost",
		Enabled: func(c Config) bool { return c.Enabled },
		Shapes:  []string{TokenShape},
		Allowed: func(c Config) []string { return c.AllowedUsers },
		Describe: func(c Config) string {
			if c.ActionsURL == "" {
				return "mattermost (websocket)"
			}
			return "mattermost (websocket, buttons at " + actionsPath(c.ActionsURL) + ")"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store), nil
		},
	})
}

// Adapter is the Mattermost channel. Create it with New (which does no
// I/O), mount it (Mount) and run it once with Run.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	store  bridge.Store
	pipe   *bridge.Pipeline
	allow  *bridge.Allowlist
	log    *slog.Logger
	api    *api
	// key signs the buttons' contexts (see ask.go).
	key []byte

	mu    sync.Mutex
	ready bool
	live  bool   // a websocket is open and what it missed read back
	self  string // the bot's user id, once known
	name  string // the bot's username
	names map[string]named
}

// named is a person's username as last read, and when.
type named struct {
	name string
	at   time.Time
}

// New returns an adapter that answers through router and keeps its
// inbox and cursors in st. It makes no connection: Run does.
func New(cfg Config, router *bridge.Router, st bridge.Store) *Adapter {
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	cfg.Delivery.Fill(&http.Client{Timeout: 60 * time.Second})
	if cfg.TypingInterval <= 0 {
		cfg.TypingInterval = 4 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	cfg.MaxMessage = cmp.Or(max(cfg.MaxMessage, 0), DefaultMaxMessage)
	if cfg.sleep == nil {
		cfg.sleep = backoff.Sleep
	}
	log := cfg.Logger.With("channel", "mattermost")
	a := &Adapter{cfg: cfg, router: router, store: st, log: log, names: map[string]named{},
		allow: bridge.NewAllowlist(allowEntries(cfg.AllowedUsers)).Keep(st, "mattermost"), key: signingKey(cfg.Token)}
	a.api = &api{base: cfg.URL + "/api/v4", token: cfg.Token, client: cfg.HTTPClient, sleep: cfg.sleep, log: log}
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "mattermost", Inbox: st, Handler: router, Outlet: a, Workers: cfg.Workers, Pacing: pacing(cfg), Stream: cfg.Stream,
	}))
	return a
}

// allowEntries reads allowed_users as the allow-list takes them: an id
// as it is, a username with "@".
func allowEntries(list []string) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		e = strings.TrimSpace(e)
		if e != "" && !isID(e) && !strings.HasPrefix(e, "@") {
			e = "@" + e
		}
		out = append(out, e)
	}
	return out
}

// isID reports whether s has the form of a Mattermost id.
func isID(s string) bool {
	if len(s) != 26 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// pacing is the server's rate limit on the bot's requests, as
// configured.
func pacing(cfg Config) bridge.Pacing {
	per := cfg.SendPerSecond
	switch {
	case per < 0:
		return bridge.Pacing{}
	case per == 0:
		per = 10
	}
	return bridge.Pacing{Global: rate.Limit(per), GlobalBurst: 100}
}

var _ bridge.Channel = (*Adapter)(nil)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "mattermost" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Ready reports whether the server accepted the token and the channel
// sends.
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
		return "Send me (@" + name + ") a direct message with /" + command + " there."
	}
	return "Send me a direct message with /" + command + " there."
}

// Run checks the token, resumes messages left unfinished before a
// restart, then keeps a websocket to the server until ctx is cancelled,
// reading back what was posted while it was not connected. It returns
// nil after a cancel, once running turns had the shutdown grace, and an
// error only when the server rejects the token. An unreachable server is
// retried with backoff.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if a.allow.Len() == 0 {
		a.log.Warn("mattermost.allowed_users is empty: the bot will refuse everyone; add your username")
	}
	if err := a.identify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// When the channel first ran is kept before anything is read: a
	// channel never read before is read back from then (and again at
	// the first connection, if this fails).
	if _, err := a.since(ctx); err != nil && ctx.Err() == nil {
		a.log.Warn("mattermost: cannot keep when the channel first ran yet", "err", err)
	}
	if err := a.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	a.mu.Lock()
	a.ready = true
	a.mu.Unlock()
	a.log.Info("mattermost channel ready")
	// Every process answers and sends; the websocket is one process's at
	// a time where several share the database.
	return a.cfg.Exclusive.Do(ctx, "mattermost websocket", a.listen)
}

// identify learns the bot's user, which checks the token. While the
// server is unreachable it keeps trying; a 401 stops it.
func (a *Adapter) identify(ctx context.Context) error {
	var me user
	err := a.policy().Do(ctx, func(err error) (bool, time.Duration) {
		return !rejected(err), 0
	}, func(ctx context.Context) error {
		err := a.api.call(ctx, http.MethodGet, "/users/me", nil, &me)
		if err != nil && ctx.Err() == nil && !rejected(err) {
			a.log.Warn("mattermost is not reachable yet; retrying", "err", err)
		}
		return err
	})
	if rejected(err) {
		return errors.New("mattermost rejected mattermost.token (401 Unauthorized): check mattermost.token (a bot account's access token, from Integrations → Bot Accounts)")
	}
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.self, a.name = me.ID, me.Username
	a.mu.Unlock()
	a.log.Info("mattermost bot identified", "user", me.Username, "user_id", me.ID)
	return nil
}

// policy is the backoff for reaching the server again.
func (a *Adapter) policy() backoff.Policy {
	return backoff.Policy{Initial: time.Second, Max: a.cfg.MaxBackoff, Jitter: 0.2, Sleep: a.cfg.sleep}
}

// bot is the bot's user id and username, once known.
func (a *Adapter) bot() (id, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.self, a.name
}

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	// Channel is the channel or direct message.
	Channel string `json:"channel"`
	// Root is the thread the answer goes to; "" at the top level.
	Root string `json:"root,omitempty"`
	// Direct marks a direct message: one chat, whatever thread a post
	// of it is in.
	Direct bool `json:"direct,omitempty"`
}

// chat is the key of the conversation r answers.
func (r route) chat() string {
	if r.Direct {
		return chatKey(r.Channel, "")
	}
	return chatKey(r.Channel, r.Root)
}

// routes keeps routes in the inbox.
var routes = bridge.JSONRoute[route]{Channel: "mattermost"}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) { return routes.Read(raw) }

func asRoute(rt any) (route, error) { return routes.Of(rt) }

func (r route) encode() []byte { return routes.Encode(r) }

// chatKey is a conversation's key: "mattermost:<channel>" for a direct
// message, "mattermost:<channel>:<root>" for a thread in a channel, each
// thread a chat with its own session.
func chatKey(channel, root string) string {
	if root == "" {
		return "mattermost:" + channel
	}
	return "mattermost:" + channel + ":" + root
}

// routeOf is where messages to the conversation key names go.
func routeOf(key string) (route, error) {
	parts := strings.Split(key, ":")
	if parts[0] != "mattermost" || len(parts) < 2 || len(parts) > 3 || !isID(parts[1]) || len(parts) == 3 && !isID(parts[2]) {
		return route{}, fmt.Errorf("mattermost: %q is not a Mattermost conversation", key)
	}
	r := route{Channel: parts[1], Direct: len(parts) == 2}
	if !r.Direct {
		r.Root = parts[2]
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

// Private reports whether chatKey is a direct message: a thread in a
// channel is everyone's there.
func (a *Adapter) Private(key string) bool {
	r, err := routeOf(key)
	return err == nil && r.Direct
}

// Admits reports whether the person with this key may use the bot now,
// as a direct message of theirs would be judged: listed in
// allowed_users by id, or by the username they last wrote with
// (bridge.Admitter).
func (a *Adapter) Admits(ctx context.Context, userKey string) (bool, error) {
	id, ok := strings.CutPrefix(userKey, "mattermost:")
	if !ok || !isID(id) {
		return false, nil
	}
	return a.allow.Admits(ctx, id)
}

var _ bridge.Admitter = (*Adapter)(nil)

// actionsPath is the path the buttons' endpoint is served at.
func actionsPath(actionsURL string) string {
	u, err := url.Parse(actionsURL)
	if err != nil || u.Path == "" || u.Path == "/" {
		return DefaultActionsPath
	}
	return u.Path
}
