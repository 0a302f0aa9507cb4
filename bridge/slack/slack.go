// Package slack is the Slack channel: direct messages and mentions in
// channels reach the shared command layer and engine, over Socket Mode or
// the HTTP Events API.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"loadout/bridge"
	"loadout/chat"
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

// Dedupe records delivered event ids. MarkSeen reports true the first time
// a key is seen; store.DB satisfies it.
type Dedupe interface {
	MarkSeen(ctx context.Context, key string) (bool, error)
}

// Config configures an Adapter. Zero values are the documented defaults.
type Config struct {
	// BotToken (xoxb-) calls the Web API.
	BotToken string
	// AppToken (xapp-) opens Socket Mode connections.
	AppToken string
	// SigningSecret verifies Events API requests.
	SigningSecret string
	// Mode is ModeSocket (default) or ModeEvents.
	Mode string
	// APIURL is the Web API base; default "https://slack.com/api/".
	APIURL string
	// AllowedUsers are Slack user ids that may use the bot; nobody else.
	AllowedUsers []string
	// AllowedChannels limits mentions to these channel ids; empty allows
	// every channel. Direct messages are always allowed.
	AllowedChannels []string
	// Workers is the number of turns run at once; default 8.
	Workers int
	// ShutdownGrace is how long in-flight turns may run after ctx is
	// cancelled; default 30s.
	ShutdownGrace time.Duration
	// Attempts is how often a Web API call is tried when Slack is busy or
	// unreachable; default 5.
	Attempts int
	// Backoff is the first wait between attempts, doubled each time;
	// default 1s. A rate limit's Retry-After takes precedence.
	Backoff time.Duration
	// ChunkSize is the longest message posted, in characters; default 3500.
	ChunkSize int
	// HTTPClient is used for the Web API and response URLs; default
	// http.DefaultClient.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Adapter connects Slack to a router. Create it with New and start it
// with Run; in ModeEvents also mount EventsHandler and CommandsHandler.
type Adapter struct {
	cfg      Config
	router   *bridge.Router
	dedupe   Dedupe
	api      *slackapi.Client
	allow    *bridge.Allowlist
	channels map[string]bool
	pool     *bridge.Pool
	log      *slog.Logger
	// sleep waits d or until ctx is done; replaced in tests.
	sleep func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	botUserID string
	stopping  bool
}

// New returns an adapter that sends messages to router and drops
// redelivered events through dedupe.
func New(cfg Config, router *bridge.Router, dedupe Dedupe) *Adapter {
	if cfg.Mode == "" {
		cfg.Mode = ModeSocket
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://slack.com/api/"
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	if cfg.Workers < 1 {
		cfg.Workers = 8
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
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
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := []slackapi.Option{slackapi.OptionAPIURL(cfg.APIURL), slackapi.OptionHTTPClient(cfg.HTTPClient)}
	if cfg.AppToken != "" {
		opts = append(opts, slackapi.OptionAppLevelToken(cfg.AppToken))
	}
	a := &Adapter{
		cfg:      cfg,
		router:   router,
		dedupe:   dedupe,
		api:      slackapi.New(cfg.BotToken, opts...),
		allow:    bridge.NewAllowlist(cfg.AllowedUsers),
		channels: map[string]bool{},
		pool:     bridge.NewPool(cfg.Workers),
		log:      cfg.Logger.With("channel", "slack"),
		sleep:    bridge.Sleep,
	}
	for _, c := range cfg.AllowedChannels {
		if c = strings.TrimSpace(c); c != "" {
			a.channels[c] = true
		}
	}
	return a
}

// Run identifies the bot, receives events until ctx is cancelled, then
// stops intake and lets in-flight turns finish for ShutdownGrace. It
// returns nil after a cancel, and an error only when Slack rejects the
// tokens or the Socket Mode connection cannot be kept up.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.drain()
	if err := a.identify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.allow.Len() == 0 {
		a.log.Warn("slack.allowed_users is empty: everybody is refused")
	}
	if a.cfg.Mode == ModeEvents {
		a.log.Info("slack events API ready", "events_path", "/slack/events", "commands_path", "/slack/commands")
		<-ctx.Done()
		return nil
	}
	return a.runSocket(ctx)
}

func (a *Adapter) drain() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	a.pool.Drain(a.cfg.ShutdownGrace)
}

// identify learns the bot's user id. While Slack is unreachable it keeps
// trying, waiting up to a minute between rounds; it gives up when the
// token is rejected or ctx is done.
func (a *Adapter) identify(ctx context.Context) error {
	var res *slackapi.AuthTestResponse
	wait := a.cfg.Backoff
	for {
		err := a.retry(ctx, "auth.test", func(ctx context.Context) error {
			var err error
			res, err = a.api.AuthTestContext(ctx)
			return err
		})
		if err == nil {
			break
		}
		if se, ok := errors.AsType[slackapi.SlackErrorResponse](err); ok {
			return fmt.Errorf("slack.bot_token was not accepted by Slack (%s): %w", se.Err, err)
		}
		if _, transient := retryable(err, 0); !transient {
			return err
		}
		a.log.Warn("slack is not reachable yet; retrying", "wait", wait, "err", err)
		if err := a.sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, time.Minute)
	}
	a.mu.Lock()
	a.botUserID = res.UserID
	a.mu.Unlock()
	a.log.Info("slack connected", "team", res.Team, "bot_user", res.UserID)
	return nil
}

func (a *Adapter) botUser() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botUserID
}

// message is one inbound message worth answering.
type message struct {
	team, channel, user, text string
	ts                        string // the message, for the working reaction
	threadTS                  string // where the reply goes; "" for the top level
	chatKey                   string
	// id names the event for the engine, so a re-run is recorded once.
	id string
}

// callback handles one Events API callback from either transport. It
// returns quickly: the turn runs on the pool.
func (a *Adapter) callback(ctx context.Context, ev slackevents.EventsAPIEvent) {
	cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent)
	if !ok {
		return
	}
	m, ok := a.toMessage(ev.TeamID, ev.InnerEvent.Data)
	if !ok {
		return
	}
	if cb.EventID != "" {
		m.id = "slack:event:" + cb.EventID
	}
	if cb.EventID != "" && a.dedupe != nil {
		first, err := a.dedupe.MarkSeen(ctx, "slack:event:"+cb.EventID)
		if err != nil {
			a.log.Error("slack dedupe failed; handling the event anyway", "event_id", cb.EventID, "err", err)
		} else if !first {
			a.log.Debug("slack event redelivered; ignored", "event_id", cb.EventID)
			return
		}
	}
	a.accept(m)
}

// toMessage filters an inner event: direct messages from people, and
// mentions in allowed channels. Everything else is dropped.
func (a *Adapter) toMessage(team string, inner any) (message, bool) {
	self := a.botUser()
	switch e := inner.(type) {
	case *slackevents.MessageEvent:
		if e.ChannelType != "im" || e.SubType != "" || e.BotID != "" || e.User == "" || e.User == self {
			return message{}, false
		}
		return message{
			team: team, channel: e.Channel, user: e.User, text: e.Text, ts: e.TimeStamp,
			threadTS: e.ThreadTimeStamp,
			chatKey:  "slack:" + team + ":" + e.Channel,
		}, true
	case *slackevents.AppMentionEvent:
		if strings.HasPrefix(e.Channel, "D") || e.BotID != "" || e.User == "" || e.User == self {
			return message{}, false
		}
		if len(a.channels) > 0 && !a.channels[e.Channel] {
			a.log.Debug("slack mention in a channel not in slack.allowed_channels; ignored", "slack_channel", e.Channel)
			return message{}, false
		}
		thread := e.ThreadTimeStamp
		if thread == "" {
			thread = e.TimeStamp // a mention at the top level starts a thread
		}
		return message{
			team: team, channel: e.Channel, user: e.User, text: e.Text, ts: e.TimeStamp,
			threadTS: thread,
			chatKey:  "slack:" + team + ":" + e.Channel + ":" + thread,
		}, true
	}
	return message{}, false
}

// accept checks the sender and queues the turn.
func (a *Adapter) accept(m message) {
	if !a.allowed(m.user) {
		if a.allow.FirstRefusal(m.user) {
			a.submit(m.chatKey, func(ctx context.Context) {
				a.post(ctx, m.channel, m.threadTS, bridge.TextRefused)
			})
		}
		return
	}
	text := a.commandWord(PlainText(m.text, a.botUser()))
	if text == "" {
		return
	}
	a.submit(m.chatKey, func(ctx context.Context) { a.turn(ctx, m, text) })
}

// allowed reports whether user may talk to the bot and logs a refusal.
func (a *Adapter) allowed(user string) bool {
	if a.allow.Allowed(user, "") {
		return true
	}
	a.log.Warn("slack user refused: add the id to slack.allowed_users to allow them", "user_id", user)
	return false
}

// commandWord lets a message that is only a command's name ("clear") run
// the command: Slack's composer takes a leading slash for its own
// commands.
func (a *Adapter) commandWord(text string) string {
	word := strings.ToLower(strings.TrimSpace(text))
	if word == "" || strings.ContainsAny(word, " \n\t") {
		return text
	}
	for _, c := range a.router.Commands() {
		if c.Name == word {
			return "/" + word
		}
	}
	return text
}

func (a *Adapter) submit(key string, job func(ctx context.Context)) {
	a.mu.Lock()
	stopping := a.stopping
	a.mu.Unlock()
	if stopping || !a.pool.Submit(key, a.guard(job)) {
		a.log.Warn("slack message dropped: shutting down", "chat", key)
	}
}

// guard keeps a panicking turn from taking the process down.
func (a *Adapter) guard(job func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		defer func() {
			if r := recover(); r != nil {
				a.log.Error("slack turn panicked", "panic", fmt.Sprint(r))
			}
		}()
		job(ctx)
	}
}

// turn answers one message: a reaction while working, then the reply.
func (a *Adapter) turn(ctx context.Context, m message, text string) {
	ref := slackapi.NewRefToMessage(m.channel, m.ts)
	reacted := a.retry(ctx, "reactions.add", func(ctx context.Context) error {
		return a.api.AddReactionContext(ctx, WorkingReaction, ref)
	}) == nil
	in := chat.Inbound{ChatKey: m.chatKey, UserKey: "slack:" + m.team + ":" + m.user, Text: text, ID: m.id}
	reply, err := a.router.Handle(ctx, in)
	if err != nil {
		a.log.Error("slack message failed", "chat", m.chatKey, "err", err)
		reply = bridge.TextFailed
	}
	if reacted {
		if err := a.retry(ctx, "reactions.remove", func(ctx context.Context) error {
			return a.api.RemoveReactionContext(ctx, WorkingReaction, ref)
		}); err != nil {
			a.log.Warn("slack reaction not removed", "err", err)
		}
	}
	a.post(ctx, m.channel, m.threadTS, reply)
}

// post sends text as one or more messages, in order, and logs a failure.
func (a *Adapter) post(ctx context.Context, channel, threadTS, text string) {
	if err := a.send(ctx, channel, threadTS, text); err != nil {
		a.log.Error("slack reply not sent", "slack_channel", channel, "err", err)
	}
}

// send posts text as one or more messages, in order.
func (a *Adapter) send(ctx context.Context, channel, threadTS, text string) error {
	for _, chunk := range bridge.Split(text, a.cfg.ChunkSize) {
		opts := []slackapi.MsgOption{slackapi.MsgOptionText(Mrkdwn(chunk), false)}
		if threadTS != "" {
			opts = append(opts, slackapi.MsgOptionTS(threadTS))
		}
		err := a.retry(ctx, "chat.postMessage", func(ctx context.Context) error {
			_, _, err := a.api.PostMessageContext(ctx, channel, opts...)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Notify sends text to the conversation named by chatKey
// ("slack:<team>:<channel>" or "slack:<team>:<channel>:<thread_ts>")
// outside a turn. It fails for a key that is not a Slack conversation or
// when Slack does not take the message.
func (a *Adapter) Notify(ctx context.Context, chatKey, text string) error {
	parts := strings.Split(chatKey, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "slack" || parts[2] == "" {
		return fmt.Errorf("slack: %q is not a Slack conversation", chatKey)
	}
	thread := ""
	if len(parts) == 4 {
		thread = parts[3]
	}
	return a.send(ctx, parts[2], thread, text)
}

// retry calls fn until it succeeds, fails for good, or Attempts run out.
// A rate limit waits its Retry-After; other transient failures back off.
func (a *Adapter) retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	delay := a.cfg.Backoff
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		wait, ok := retryable(err, delay)
		if !ok || attempt >= a.cfg.Attempts || ctx.Err() != nil {
			return fmt.Errorf("slack %s: %w", what, err)
		}
		a.log.Debug("slack call failed; retrying", "method", what, "attempt", attempt, "wait", wait, "err", err)
		if err := a.sleep(ctx, wait); err != nil {
			return fmt.Errorf("slack %s: %w", what, err)
		}
		if _, limited := errors.AsType[*slackapi.RateLimitedError](err); !limited {
			delay *= 2
		}
	}
}

// retryable reports whether err is worth another attempt and how long to
// wait first.
func retryable(err error, backoff time.Duration) (time.Duration, bool) {
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		return rl.RetryAfter, true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) {
		return backoff, sc.Code >= 500 || sc.Code == http.StatusRequestTimeout
	}
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return backoff, true
		}
		return 0, false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return backoff, true
	}
	return backoff, false
}
