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
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"golang.org/x/time/rate"

	"loadout/backoff"
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

// Config configures an Adapter. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// BotToken (xoxb-) calls the Web API.
	BotToken string `yaml:"bot_token"`
	// AppToken (xapp-) opens Socket Mode connections.
	AppToken string `yaml:"app_token"`
	// SigningSecret verifies Events API requests.
	SigningSecret string `yaml:"signing_secret"`
	// Mode is ModeSocket (default) or ModeEvents.
	Mode string `yaml:"mode"`
	// APIURL is the Web API base; default "https://slack.com/api/".
	APIURL string `yaml:"api_url"`
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
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = bridge.NopObserver{}
	}
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
	return bridge.Pacing{PerChat: func(b []byte) (string, rate.Limit, int) {
		var r route
		if json.Unmarshal(b, &r) != nil {
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

func (r route) encode() []byte {
	b, _ := json.Marshal(r) // strings and a bool always encode
	return b
}

// callback hands one Events API callback, from either transport, to the
// pipeline. It returns quickly: the turn runs on the pipeline. An error
// means the event was not stored and must not be acknowledged.
func (a *Adapter) callback(ctx context.Context, ev slackevents.EventsAPIEvent) error {
	cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent)
	if !ok || cb.EventID == "" {
		return nil
	}
	if !a.identified() {
		return errNotReady
	}
	id := "event:" + cb.EventID
	if sharesFiles(ev.InnerEvent.Data) {
		// A redelivered event is dropped by the inbox; its files are not
		// downloaded a second time first.
		if seen, err := a.pipe.Seen(ctx, id); err == nil && seen {
			return nil
		}
	}
	_, err := a.pipe.Receive(ctx, id, bridge.Pending{}, func() (bridge.Pending, bool) {
		return a.toPending(ctx, ev.TeamID, ev.InnerEvent.Data)
	})
	return err
}

// toPending filters an inner event: direct messages from people, and
// mentions in allowed channels. Everything else is dropped; a stranger
// gets one refusal. team is the workspace the event was delivered for,
// which holds the conversation; the person's own workspace is the
// event's user_team when they are a guest in a channel shared between
// workspaces, and team otherwise.
func (a *Adapter) toPending(ctx context.Context, team string, inner any) (bridge.Pending, bool) {
	self := a.botUser()
	var user, userTeam, text, chatKey string
	var r route
	var shared []slackapi.File
	switch e := inner.(type) {
	case *slackevents.MessageEvent:
		if e.ChannelType != "im" || (e.SubType != "" && e.SubType != "file_share") || e.BotID != "" || e.User == "" || e.User == self {
			return bridge.Pending{}, false
		}
		user, userTeam, text = e.User, e.UserTeam, e.Text
		if e.Message != nil {
			shared = e.Message.Files
		}
		r = route{Channel: e.Channel, Thread: e.ThreadTimeStamp, TS: e.TimeStamp}
		chatKey = "slack:" + team + ":" + e.Channel
	case *slackevents.AppMentionEvent:
		if strings.HasPrefix(e.Channel, "D") || e.BotID != "" || e.User == "" || e.User == self {
			return bridge.Pending{}, false
		}
		if len(a.channels) > 0 && !a.channels[e.Channel] {
			a.log.Debug("slack mention in a channel not in slack.allowed_channels; ignored", "slack_channel", e.Channel)
			return bridge.Pending{}, false
		}
		thread := e.ThreadTimeStamp
		if thread == "" {
			thread = e.TimeStamp // a mention at the top level starts a thread
		}
		user, userTeam, text = e.User, e.UserTeam, e.Text
		shared = e.Files
		r = route{Channel: e.Channel, Thread: thread, TS: e.TimeStamp}
		chatKey = "slack:" + team + ":" + e.Channel + ":" + thread
	default:
		return bridge.Pending{}, false
	}
	if userTeam == "" {
		userTeam = team
	}
	if !a.allowed(userTeam, user) {
		if !a.allow.FirstRefusal(userTeam + ":" + user) {
			return bridge.Pending{}, false
		}
		r.TS = ""
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: chatKey}, Route: r.encode(), Reply: bridge.TextRefused}, true
	}
	text = a.commandWord(PlainText(text, self))
	var notes, images []string
	var voice *bridge.VoiceNote
	for _, f := range shared {
		if voice == nil && isAudio(f) {
			// The first recording is the message; it is heard.
			note, reply, ok := a.takeVoice(ctx, chatKey, f)
			if !ok || reply != "" {
				r.TS = ""
				return bridge.Pending{Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "slack:" + userTeam + ":" + user}, Route: r.encode(), Reply: reply}, ok
			}
			voice = note
			continue
		}
		note, image := a.keepFile(ctx, chatKey, f)
		notes = append(notes, note)
		if image != "" {
			images = append(images, image)
		}
	}
	if len(notes) > 0 {
		text = strings.TrimSpace(strings.Join(notes, "\n") + "\n" + text)
	}
	if text == "" && voice == nil {
		return bridge.Pending{}, false
	}
	return bridge.Pending{
		Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "slack:" + userTeam + ":" + user, Text: text, Images: images},
		Route:   r.encode(),
		Voice:   voice,
	}, true
}

// allowed reports whether user of team may talk to the bot, and logs a
// refusal. An entry "TEAM:USER" allows that user of that workspace; a
// bare user id allows the user only in the app's own workspace, so a
// shared channel's guest with a colliding id is not let in.
func (a *Adapter) allowed(team, user string) bool {
	a.mu.Lock()
	own := a.teamID
	a.mu.Unlock()
	if a.allow.Allowed(team+":"+user, "") || (team != "" && team == own && a.allow.Allowed(user, "")) {
		return true
	}
	a.log.Warn("slack user refused: add TEAM:USER (or the bare user id, for your own workspace) to slack.allowed_users to allow them",
		"team_id", team, "user_id", user)
	return false
}

// commandWord lets a message that is only a command's name ("clear"), or
// a command with its one argument ("connect google"), run the command:
// Slack's composer takes a leading slash for its own commands.
func (a *Adapter) commandWord(text string) string {
	words := strings.Fields(strings.ToLower(text))
	if len(words) == 0 || len(words) > 2 {
		return text
	}
	for _, c := range a.router.Commands() {
		if c.Name != words[0] {
			continue
		}
		// "clear", or a command with its one argument: "connect google".
		if len(words) == 1 || strings.EqualFold(c.Args, words[1]) {
			return "/" + strings.Join(words, " ")
		}
	}
	return text
}

// Split cuts a Markdown answer into the parts posted as separate
// messages, never inside a code block.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, a.cfg.ChunkSize) }

// Send posts one part to the route: in the channel or thread, or as a
// slash command's private answer.
func (a *Adapter) Send(ctx context.Context, raw []byte, part string) error {
	var r route
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("slack: unreadable route: %w", err)
	}
	return a.deliver(ctx, r, nil, Mrkdwn(part), nil)
}

// deliver posts body (with blocks, when given) to the route: in the
// channel or thread, as a slash command's private answer, or by updating
// draft into it — posted anew when the draft was deleted meanwhile.
func (a *Adapter) deliver(ctx context.Context, r route, draft []byte, body string, blocks []slackapi.Block) error {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(body, false)}
	var hook *slackapi.Blocks
	if blocks != nil {
		opts = append(opts, slackapi.MsgOptionBlocks(blocks...))
		hook = &slackapi.Blocks{BlockSet: blocks}
	}
	switch {
	case r.Ephemeral && r.ResponseURL != "":
		return a.retry(ctx, "response_url", func(ctx context.Context) error {
			return slackapi.PostWebhookCustomHTTPContext(ctx, r.ResponseURL, a.cfg.HTTPClient,
				&slackapi.WebhookMessage{Text: body, Blocks: hook, ResponseType: slackapi.ResponseTypeEphemeral})
		})
	case r.Ephemeral:
		return a.retry(ctx, "chat.postEphemeral", func(ctx context.Context) error {
			_, err := a.api.PostEphemeralContext(ctx, r.Channel, r.User, opts...)
			return err
		})
	case draft != nil:
		err := a.retry(ctx, "chat.update", func(ctx context.Context) error {
			_, _, _, err := a.api.UpdateMessageContext(ctx, r.Channel, string(draft), opts...)
			return err
		})
		if !slackError(err, "message_not_found") {
			return err
		}
	}
	if r.Thread != "" {
		opts = append(opts, slackapi.MsgOptionTS(r.Thread))
	}
	return a.retry(ctx, "chat.postMessage", func(ctx context.Context) error {
		_, _, err := a.api.PostMessageContext(ctx, r.Channel, opts...)
		return err
	})
}

// Draft shows the answer so far: the first call posts it, later ones
// update that message. An ephemeral answer (a slash command's) is not
// drafted: it cannot be updated by the bot, so Draft posts nothing and
// the answer is sent whole.
func (a *Adapter) Draft(ctx context.Context, raw, draft []byte, text string) ([]byte, error) {
	var r route
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("slack: unreadable route: %w", err)
	}
	if r.Ephemeral {
		return nil, nil
	}
	body := draftText(text, a.cfg.ChunkSize)
	if draft != nil {
		return draft, a.update(ctx, r, draft, body)
	}
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(body, false)}
	if r.Thread != "" {
		opts = append(opts, slackapi.MsgOptionTS(r.Thread))
	}
	var ts string
	err := a.retry(ctx, "chat.postMessage", func(ctx context.Context) error {
		var err error
		_, ts, err = a.api.PostMessageContext(ctx, r.Channel, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return []byte(ts), nil
}

// Replace updates the draft into part, formatted as Send formats it; a
// draft deleted meanwhile is posted anew.
func (a *Adapter) Replace(ctx context.Context, raw, draft []byte, part string) error {
	var r route
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("slack: unreadable route: %w", err)
	}
	return a.deliver(ctx, r, draft, Mrkdwn(part), nil)
}

func (a *Adapter) update(ctx context.Context, r route, ts []byte, body string) error {
	return a.retry(ctx, "chat.update", func(ctx context.Context) error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, r.Channel, string(ts), slackapi.MsgOptionText(body, false))
		return err
	})
}

// draftText is the answer so far, plain (its Markdown may be cut
// half-way), within one message of limit bytes and marked unfinished.
func draftText(text string, limit int) string {
	const more = " …"
	if len(text)+len(more) > limit {
		cut := max(limit-len(more), 0)
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return strings.TrimRightFunc(text, unicode.IsSpace) + more
}

// Working puts a reaction on the person's message until stop is called.
// A reaction already there (left by a run cut short before a restart) is
// taken over, so it is removed when this answer is sent. stop removes it
// even when ctx was cancelled by a shutdown, trying for a few seconds.
func (a *Adapter) Working(ctx context.Context, raw []byte) (stop func()) {
	var r route
	if json.Unmarshal(raw, &r) != nil || r.TS == "" || r.Ephemeral {
		return func() {}
	}
	ref := slackapi.NewRefToMessage(r.Channel, r.TS)
	if err := a.retry(ctx, "reactions.add", func(ctx context.Context) error {
		return a.api.AddReactionContext(ctx, WorkingReaction, ref)
	}); err != nil && !slackError(err, "already_reacted") {
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if err := a.retry(ctx, "reactions.remove", func(ctx context.Context) error {
				return a.api.RemoveReactionContext(ctx, WorkingReaction, ref)
			}); err != nil && !slackError(err, "no_reaction") {
				a.log.Warn("slack reaction not removed", "err", err)
			}
		})
	}
}

// cleanupTimeout bounds removing the working reaction after a shutdown
// cancelled the turn.
const cleanupTimeout = 5 * time.Second

// slackError reports whether err is Slack's error answer code.
func slackError(err error, code string) bool {
	se, ok := errors.AsType[slackapi.SlackErrorResponse](err)
	return ok && se.Err == code
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

var (
	_ bridge.Channel    = (*Adapter)(nil)
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Mounter    = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Drafter    = (*Adapter)(nil)
	_ bridge.Speaker    = (*Adapter)(nil)
)

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

// policy is the channel's retry schedule with the given number of
// attempts (0: until ctx ends).
func (a *Adapter) policy(attempts int) backoff.Policy {
	return backoff.Policy{Attempts: attempts, Initial: a.cfg.Backoff, Max: time.Hour,
		Sleep:   func(ctx context.Context, d time.Duration) error { return a.sleep(ctx, d) },
		OnRetry: func(error, time.Duration) { a.cfg.Observer.Retried("slack") }}
}

// retry calls fn until it succeeds, fails for good, or Attempts run out.
// A rate limit waits its Retry-After; other transient failures back off.
func (a *Adapter) retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	err := a.policy(a.cfg.Attempts).Do(ctx, classify, func(ctx context.Context) error {
		err := fn(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.Debug("slack call failed", "method", what, "err", err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("slack %s: %w", what, err)
	}
	return nil
}

// classify reports whether err is worth another attempt and how long
// Slack asked to wait first.
func classify(err error) (bool, time.Duration) {
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		return true, rl.RetryAfter
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false, 0
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code >= 500 || sc.Code == http.StatusRequestTimeout, 0
	}
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return true, 0
		}
		return false, 0
	}
	var ne net.Error
	return errors.As(err, &ne), 0
}
