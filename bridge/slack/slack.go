// Package slack is the Slack channel: direct messages and mentions in
// channels, and the /loadout slash command, reach the shared command
// layer and engine through the delivery pipeline, over Socket Mode or the
// HTTP Events API.
package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"
	"golang.org/x/time/rate"

	"loadout/backoff"
	"loadout/bridge"
)

// Modes of receiving events.
const (
	// ModeSocket receives events over a Socket Mode websocket; it needs no
	// public URL.
	ModeSocket = "socket"
	// ModeEvents receives events over HTTP (EventsHandler, CommandsHandler).
	ModeEvents = "events"
)

// WorkingReaction is the reaction shown on a message while its answer is
// being prepared.
const WorkingReaction = "hourglass_flowing_sand"

// Config configures an Adapter. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (slack.enabled).
	Enabled bool `yaml:"enabled"`
	// BotToken (xoxb-) calls the Web API.
	BotToken string `yaml:"bot_token" secret:"true"`
	// AppToken (xapp-) opens Socket Mode connections.
	AppToken string `yaml:"app_token" secret:"true"`
	// SigningSecret verifies Events API requests.
	SigningSecret string `yaml:"signing_secret" secret:"true"`
	// Mode is ModeSocket (default) or ModeEvents.
	Mode string `yaml:"mode"`
	// APIURL is the Web API base; default "https://slack.com/api/".
	APIURL string `yaml:"api_url" secret:"url"`
	// AllowedUsers may use the bot: "TEAM:USER" entries, or bare user ids,
	// which match only in the app's own workspace. Nobody else may.
	AllowedUsers []string `yaml:"allowed_users"`
	// AllowedChannels limits mentions to these channel ids; empty allows
	// every channel. Direct messages are always allowed.
	AllowedChannels []string `yaml:"allowed_channels"`
	// Workers is the number of turns run at once; default 8.
	Workers int `yaml:"workers"`
	// Attempts is how often a Web API call is tried when Slack is busy or
	// unreachable; default 5.
	Attempts int `yaml:"attempts"`
	// Backoff is the first wait between attempts, doubled each time;
	// default 1s. A rate limit's Retry-After takes precedence.
	Backoff time.Duration `yaml:"backoff"`
	// SendPerChannelSecond paces posts by Slack's published limit of
	// about one message a second in a channel; zero means 1, a negative
	// value turns pacing off.
	SendPerChannelSecond float64 `yaml:"send_per_channel_second"`
	// Stream shows an answer while the model writes it: one message,
	// updated as the text grows (at most once a second), then replaced
	// by the formatted answer. Default off.
	Stream bool `yaml:"stream"`
	// ChunkSize is the longest message posted, in characters; default 3500.
	ChunkSize int `yaml:"chunk_size"`
}

// Adapter connects Slack to a router. Create it with New and start it
// with Run; in ModeEvents also mount EventsHandler and CommandsHandler.
type Adapter struct {
	cfg      Config
	router   *bridge.Router
	pipe     *bridge.Pipeline
	api      *slackapi.Client
	allow    *bridge.Allowlist
	channels map[string]bool
	log      *slog.Logger
	// sleep waits d or until ctx is done; replaced in tests.
	sleep func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	botUserID string
	teamID    string
}

// New returns an adapter that answers through router and keeps its
// events in inbox.
func New(cfg Config, router *bridge.Router, inbox bridge.Inbox) *Adapter {
	if cfg.Mode == "" {
		cfg.Mode = ModeSocket
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://slack.com/api/"
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	if cfg.Attempts < 1 {
		cfg.Attempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 3500
	}
	cfg.Delivery.Fill(http.DefaultClient)
	opts := []slackapi.Option{slackapi.OptionAPIURL(cfg.APIURL), slackapi.OptionHTTPClient(cfg.HTTPClient)}
	if cfg.AppToken != "" {
		opts = append(opts, slackapi.OptionAppLevelToken(cfg.AppToken))
	}
	log := cfg.Logger.With("channel", "slack")
	a := &Adapter{
		cfg:      cfg,
		router:   router,
		api:      slackapi.New(cfg.BotToken, opts...),
		allow:    bridge.NewAllowlist(cfg.AllowedUsers),
		channels: map[string]bool{},
		log:      log,
		sleep:    backoff.Sleep,
	}
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "slack", Inbox: inbox, Handler: router, Outlet: a, Workers: cfg.Workers, Pacing: pacing(cfg), Stream: cfg.Stream,
	}))
	for _, c := range cfg.AllowedChannels {
		if c = strings.TrimSpace(c); c != "" {
			a.channels[c] = true
		}
	}
	return a
}

// Run identifies the bot, resumes messages left unfinished before a
// restart, receives events until ctx is cancelled, then stops intake and
// lets in-flight turns finish for ShutdownGrace. It returns nil after a
// cancel, and an error only when Slack rejects the tokens or the Socket
// Mode connection cannot be kept up.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if err := a.identify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.allow.Len() == 0 {
		a.log.Warn("slack.allowed_users is empty: everybody is refused")
	}
	if err := a.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	if a.cfg.Mode == ModeEvents {
		a.log.Info("slack events API ready", "events_path", "/slack/events", "commands_path", "/slack/commands")
		<-ctx.Done()
		return nil
	}
	return a.cfg.Exclusive.Do(ctx, "slack socket mode", a.runSocket)
}

// identify learns the bot's user id and workspace. While Slack is
// unreachable it keeps trying, waiting up to a minute between tries; it
// gives up when the token is rejected or ctx is done.
func (a *Adapter) identify(ctx context.Context) error {
	var res *slackapi.AuthTestResponse
	p := a.policy(0)
	p.Max = time.Minute
	err := p.Do(ctx, classify, func(ctx context.Context) error {
		var err error
		res, err = a.api.AuthTestContext(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("slack is not reachable yet; retrying", "err", err)
		}
		return err
	})
	if err != nil {
		if se, ok := errors.AsType[slackapi.SlackErrorResponse](err); ok {
			return fmt.Errorf("slack.bot_token was not accepted by Slack (%s): %w", se.Err, err)
		}
		return err
	}
	a.mu.Lock()
	a.botUserID, a.teamID = res.UserID, res.TeamID
	a.mu.Unlock()
	a.log.Info("slack connected", "team", res.Team, "bot_user", res.UserID)
	return nil
}

// errNotReady refuses an event that arrives before the adapter knows its
// bot user and workspace, which judging it needs; Slack delivers it again.
var errNotReady = errors.New("slack: not connected yet")

// pacing is Slack's published limit, as configured.
func pacing(cfg Config) bridge.Pacing {
	per := cfg.SendPerChannelSecond
	switch {
	case per < 0:
		return bridge.Pacing{}
	case per == 0:
		per = 1
	}
	return bridge.Pacing{PerChat: func(rt any) (string, rate.Limit, int) {
		r, ok := rt.(route)
		if !ok {
			return "", 0, 0
		}
		return r.Channel, rate.Limit(per), 2
	}}
}

// Ready reports whether the adapter has reached Slack and knows its bot
// user and workspace.
func (a *Adapter) Ready() bool { return a.identified() }

func (a *Adapter) identified() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.teamID != ""
}

func (a *Adapter) botUser() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botUserID
}

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	Channel string `json:"channel"`
	// Thread is the thread the answer goes to; "" for the top level.
	Thread string `json:"thread,omitempty"`
	// TS is the person's message, which carries the working reaction.
	TS string `json:"ts,omitempty"`
	// Ephemeral answers a slash command: through ResponseURL, or as an
	// ephemeral message to User when there is none.
	Ephemeral   bool   `json:"ephemeral,omitempty"`
	ResponseURL string `json:"response_url,omitempty"`
	User        string `json:"user,omitempty"`
}

// ReadRoute reads a route the inbox keeps; the pipeline hands the route
// to the channel's other methods.
func (a *Adapter) ReadRoute(raw []byte) (any, error) {
	var r route
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("slack: unreadable route: %w", err)
	}
	return r, nil
}

// asRoute is a route as the pipeline hands it back.
func asRoute(rt any) (route, error) {
	r, ok := rt.(route)
	if !ok {
		return route{}, fmt.Errorf("slack: %T is not a Slack route", rt)
	}
	return r, nil
}

func (r route) encode() []byte {
	b, _ := json.Marshal(r) // strings and a bool always encode
	return b
}

// routeOf is where messages to the conversation chatKey names go.
func routeOf(chatKey string) (route, error) {
	parts := strings.Split(chatKey, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "slack" || parts[2] == "" {
		return route{}, fmt.Errorf("slack: %q is not a Slack conversation", chatKey)
	}
	r := route{Channel: parts[2]}
	if len(parts) == 4 {
		r.Thread = parts[3]
	}
	return r, nil
}

var _ bridge.Channel = (*Adapter)(nil)

// Invite says where the person's direct message with the app is; Slack's
// composer takes command without its slash.
func (a *Adapter) Invite(command string) string {
	return "Open a direct message with me (under Apps) and send " + command + " there."
}

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "slack" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Route is where messages to the conversation chatKey names go
// ("slack:<team>:<channel>" or "slack:<team>:<channel>:<thread_ts>").
func (a *Adapter) Route(chatKey string) ([]byte, error) {
	r, err := routeOf(chatKey)
	if err != nil {
		return nil, err
	}
	return r.encode(), nil
}

// Private reports whether chatKey is a direct message: Slack's ids of
// those start with D.
func (a *Adapter) Private(chatKey string) bool {
	r, err := routeOf(chatKey)
	return err == nil && strings.HasPrefix(r.Channel, "D") && r.Thread == ""
}

// Mount serves the Events API endpoints, in events mode: events, slash
// commands and button presses.
func (a *Adapter) Mount(mux *http.ServeMux) {
	if a.cfg.Mode != ModeEvents {
		return
	}
	mux.Handle("POST /slack/events", a.EventsHandler())
	mux.Handle("POST /slack/commands", a.CommandsHandler())
	mux.Handle("POST /slack/interactivity", a.InteractivityHandler())
}
