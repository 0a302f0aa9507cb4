// Package telegram is the Telegram channel. It receives updates by long
// polling or by webhook, keeps every accepted message in a durable inbox
// before acknowledging it, answers through the shared command router and
// engine, and sends replies as Telegram HTML, split at Telegram's size
// limit. People not on the allowlist get one short refusal.
package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge"
	"loadout/chat"
)

// Inbox is the durable state the channel needs: the update offset and the
// accepted messages not answered yet. Implementations must be safe for
// concurrent use.
type Inbox interface {
	// TelegramOffset returns the next update id to request, 0 if none.
	TelegramOffset(ctx context.Context) (int64, error)
	// TelegramSetOffset stores the next update id to request.
	TelegramSetOffset(ctx context.Context, offset int64) error
	// TelegramAccept stores an update as pending, reporting false (and
	// changing nothing) if its update id is already stored.
	TelegramAccept(ctx context.Context, updateID int64, chatKey, userKey, text, route string) (bool, error)
	// TelegramPending calls fn for each update not marked done, in update
	// id order; reply is the stored answer, empty if none yet.
	TelegramPending(ctx context.Context, fn func(updateID int64, chatKey, userKey, text, route, reply string)) error
	// TelegramAnswered stores the answer of an update before it is sent.
	TelegramAnswered(ctx context.Context, updateID int64, reply string) error
	// TelegramDone marks an update as handled.
	TelegramDone(ctx context.Context, updateID int64) error
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
	// Token is the bot token from BotFather. Required.
	Token string
	// APIEndpoint is the Bot API URL format with two %s (token, method);
	// default tgbotapi.APIEndpoint. Any Bot-API-compatible server works.
	APIEndpoint string
	// HTTPClient makes the requests; default a new http.Client. Requests
	// carry their own deadlines, so it needs no overall timeout.
	HTTPClient *http.Client
	// AllowedUsers are numeric user ids and @usernames. Empty allows
	// nobody.
	AllowedUsers []string
	// Mode is ModePolling (default) or ModeWebhook.
	Mode string
	// WebhookURL is the public HTTPS URL Telegram posts updates to, and
	// WebhookSecret the token it sends in X-Telegram-Bot-Api-Secret-Token.
	// Both are required in webhook mode; requests without the secret are
	// rejected.
	WebhookURL    string
	WebhookSecret string
	// Workers bounds the turns running at once; default 8.
	Workers int
	// PollTimeout is the long-poll timeout; default 30s.
	PollTimeout time.Duration
	// ShutdownGrace is how long in-flight turns may run after Run's context
	// is cancelled; default 30s.
	ShutdownGrace time.Duration
	// TypingInterval is how often "typing…" is renewed; default 4s.
	TypingInterval time.Duration
	// MaxBackoff caps the wait between retries after errors; default 1m.
	MaxBackoff time.Duration
	Logger     *slog.Logger
}

// Adapter is the Telegram channel. Run it once; it also serves the webhook
// through ServeHTTP in webhook mode.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	inbox  Inbox
	allow  *bridge.Allowlist
	log    *slog.Logger
	// sleep waits d or until ctx is done; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	bot  *tgbotapi.BotAPI
	pool *bridge.Pool

	warnOnce sync.Map // optional methods already reported as failing
}

// New returns an adapter that answers through router and keeps its state
// in inbox.
func New(cfg Config, router *bridge.Router, inbox Inbox) *Adapter {
	if cfg.APIEndpoint == "" {
		cfg.APIEndpoint = tgbotapi.APIEndpoint
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Mode == "" {
		cfg.Mode = ModePolling
	}
	if cfg.Workers < 1 {
		cfg.Workers = 8
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	if cfg.TypingInterval <= 0 {
		cfg.TypingInterval = 4 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Adapter{
		cfg: cfg, router: router, inbox: inbox, allow: bridge.NewAllowlist(cfg.AllowedUsers),
		log: cfg.Logger, sleep: bridge.Sleep,
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

// Run connects to the Bot API, re-queues messages accepted before a
// restart, and receives updates until ctx is cancelled. Then it stops
// taking updates, lets running turns finish for ShutdownGrace, and returns
// nil. Network errors are retried with backoff; Run returns an error only
// when the Bot API rejects the token.
func (a *Adapter) Run(ctx context.Context) error {
	if a.allow.Len() == 0 {
		a.log.Warn("telegram.allowed_users is empty: the bot will refuse everyone; add your numeric user id or @username")
	}
	bot, err := a.connect(ctx)
	if err != nil || bot == nil {
		return err
	}
	a.log.Info("telegram bot connected", "username", "@"+bot.Self.UserName, "mode", a.cfg.Mode)
	pool := bridge.NewPool(a.cfg.Workers)
	a.mu.Lock()
	a.bot, a.pool = bot, pool
	a.mu.Unlock()
	defer pool.Drain(a.cfg.ShutdownGrace)

	a.setCommands(ctx)
	if err := a.requeue(ctx, pool); err != nil {
		return nil // ctx done
	}
	if a.cfg.Mode == ModeWebhook {
		a.setWebhook(ctx)
		<-ctx.Done()
		return nil
	}
	if _, err := a.request(ctx, "deleteWebhook", tgbotapi.Params{}); err != nil {
		a.optionalFailed("deleteWebhook", err)
	}
	a.poll(ctx)
	return nil
}

// connect calls getMe until it succeeds. It returns nil, nil when ctx is
// done first, and an error when the token is rejected.
func (a *Adapter) connect(ctx context.Context) (*tgbotapi.BotAPI, error) {
	b := backoff{max: a.cfg.MaxBackoff}
	for {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		bot, err := tgbotapi.NewBotAPIWithClient(a.cfg.Token, a.cfg.APIEndpoint, doer{rctx, a.cfg.HTTPClient})
		cancel()
		if err == nil {
			return bot, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		var te *tgbotapi.Error
		if errors.As(err, &te) && (te.Code == http.StatusUnauthorized || te.Code == http.StatusNotFound) {
			return nil, fmt.Errorf("the Bot API rejected telegram.token (%d %s): check telegram.token (and telegram.api_endpoint if set)", te.Code, te.Message)
		}
		a.log.Warn("telegram: cannot reach the Bot API, retrying", "err", err)
		if a.sleep(ctx, b.next()) != nil {
			return nil, nil
		}
	}
}

// api returns the bot with requests bound to ctx.
func (a *Adapter) api(ctx context.Context) *tgbotapi.BotAPI {
	a.mu.Lock()
	b := *a.bot
	a.mu.Unlock()
	b.Client = doer{ctx, a.cfg.HTTPClient}
	return &b
}

// requestTimeout bounds every request but the long poll.
const requestTimeout = 30 * time.Second

// request calls a Bot API method once.
func (a *Adapter) request(ctx context.Context, method string, p tgbotapi.Params) (*tgbotapi.APIResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return a.api(ctx).MakeRequest(method, p)
}

// call calls a method, waiting out 429s (retry_after) and retrying server
// and network errors a few times.
func (a *Adapter) call(ctx context.Context, method string, p tgbotapi.Params) (*tgbotapi.APIResponse, error) {
	b := backoff{max: a.cfg.MaxBackoff}
	for attempt := 1; ; attempt++ {
		resp, err := a.request(ctx, method, p)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		var te *tgbotapi.Error
		var wait time.Duration
		switch {
		case errors.As(err, &te) && te.Code == http.StatusTooManyRequests && attempt < 8:
			wait = retryAfter(te)
			a.log.Info("telegram: rate limited, waiting", "method", method, "retry_after", wait)
		case errors.As(err, &te) && te.Code < 500:
			return resp, err
		case attempt < 4:
			wait = b.next()
			a.log.Warn("telegram: request failed, retrying", "method", method, "err", err)
		default:
			return resp, err
		}
		if err := a.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func retryAfter(te *tgbotapi.Error) time.Duration {
	if te.RetryAfter > 0 {
		return time.Duration(te.RetryAfter) * time.Second
	}
	return time.Second
}

// optionalFailed logs a failed optional call: a warning the first time per
// method, debug after.
func (a *Adapter) optionalFailed(method string, err error) {
	if _, seen := a.warnOnce.LoadOrStore(method, true); seen {
		a.log.Debug("telegram: optional call failed", "method", method, "err", err)
		return
	}
	a.log.Warn("telegram: optional call failed; going on without it", "method", method, "err", err)
}

// setCommands registers the router's commands as the bot's menu.
func (a *Adapter) setCommands(ctx context.Context) {
	var cmds []tgbotapi.BotCommand
	for _, c := range a.router.Commands() {
		desc := c.Help
		if desc == "" {
			desc = c.Name
		}
		if r := []rune(desc); len(r) > 256 {
			desc = string(r[:256])
		}
		cmds = append(cmds, tgbotapi.BotCommand{Command: c.Name, Description: desc})
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := a.api(rctx).Request(tgbotapi.NewSetMyCommands(cmds...)); err != nil && ctx.Err() == nil {
		a.optionalFailed("setMyCommands", err)
	}
}

// setWebhook points Telegram at WebhookURL, retrying until it works.
func (a *Adapter) setWebhook(ctx context.Context) {
	b := backoff{max: a.cfg.MaxBackoff}
	p := tgbotapi.Params{"url": a.cfg.WebhookURL, "secret_token": a.cfg.WebhookSecret, "allowed_updates": `["message"]`}
	for {
		_, err := a.call(ctx, "setWebhook", p)
		if err == nil || ctx.Err() != nil {
			return
		}
		a.log.Error("telegram: setWebhook failed; retrying (check telegram.webhook_url)", "err", err)
		if a.sleep(ctx, b.next()) != nil {
			return
		}
	}
}

// requeue submits every accepted update whose reply was not sent. It
// retries store errors until ctx is done.
func (a *Adapter) requeue(ctx context.Context, pool *bridge.Pool) error {
	b := backoff{max: a.cfg.MaxBackoff}
	for {
		n := 0
		err := a.inbox.TelegramPending(ctx, func(id int64, chatKey, userKey, text, route, reply string) {
			var r routeInfo
			if err := json.Unmarshal([]byte(route), &r); err != nil {
				a.log.Error("telegram: unreadable inbox entry; dropping it", "update_id", id, "err", err)
				return
			}
			n++
			pool.Submit(chatKey, a.job(item{id: id, in: chat.Inbound{ChatKey: chatKey, UserKey: userKey, Text: text, ID: updateRef(id)}, route: r, reply: reply}))
		})
		if err == nil {
			if n > 0 {
				a.log.Info("telegram: answering messages accepted before the restart", "count", n)
			}
			return nil
		}
		a.log.Error("telegram: cannot read the inbox, retrying", "err", err)
		if err := a.sleep(ctx, b.next()); err != nil {
			return err
		}
	}
}

// poll long-polls getUpdates until ctx is done. The offset advances only
// after every update of a batch is in the inbox.
func (a *Adapter) poll(ctx context.Context) {
	b := backoff{max: a.cfg.MaxBackoff}
	var offset int64
	for {
		var err error
		offset, err = a.inbox.TelegramOffset(ctx)
		if err == nil {
			break
		}
		a.log.Error("telegram: cannot read the update offset, retrying", "err", err)
		if a.sleep(ctx, b.next()) != nil {
			return
		}
	}
	for ctx.Err() == nil {
		ups, err := a.updates(ctx, offset)
		if err == nil {
			var next int64
			next, err = a.accept(ctx, ups)
			if err == nil && next > offset {
				offset = next
				if err := a.inbox.TelegramSetOffset(ctx, offset); err != nil && ctx.Err() == nil {
					// The updates are in the inbox: a redelivery is recognised.
					a.log.Error("telegram: cannot store the update offset", "err", err)
				}
			}
		}
		if err == nil {
			b.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait := b.next()
		var te *tgbotapi.Error
		if errors.As(err, &te) && te.Code == http.StatusTooManyRequests {
			wait = retryAfter(te)
		}
		if errors.As(err, &te) && te.Code == http.StatusConflict {
			a.log.Error("telegram: getUpdates conflicts with a webhook or another running instance of this bot", "err", err)
		} else {
			a.log.Warn("telegram: getUpdates failed, retrying", "err", err, "wait", wait)
		}
		if a.sleep(ctx, wait) != nil {
			return
		}
	}
}

// updates fetches one batch, waiting up to PollTimeout for it.
func (a *Adapter) updates(ctx context.Context, offset int64) ([]update, error) {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.PollTimeout+15*time.Second)
	defer cancel()
	resp, err := a.api(rctx).Request(tgbotapi.UpdateConfig{
		Offset: int(offset), Timeout: int(a.cfg.PollTimeout / time.Second), AllowedUpdates: []string{"message"},
	})
	if err != nil {
		return nil, err
	}
	var ups []update
	if err := json.Unmarshal(resp.Result, &ups); err != nil {
		return nil, fmt.Errorf("decode getUpdates: %w", err)
	}
	return ups, nil
}

// update is the part of a Telegram update the channel reads. Forum topic
// fields are newer than the client library, so they are decoded here.
type update struct {
	UpdateID int64    `json:"update_id"`
	Message  *message `json:"message"`
}

type message struct {
	tgbotapi.Message
	MessageThreadID int  `json:"message_thread_id"`
	IsTopicMessage  bool `json:"is_topic_message"`
}

// routeInfo is where a reply goes; it is stored with the inbox entry.
type routeInfo struct {
	ChatID   int64 `json:"chat"`
	ThreadID int   `json:"thread,omitempty"`
	ReplyTo  int   `json:"reply_to,omitempty"`
}

type item struct {
	id    int64
	in    chat.Inbound
	route routeInfo
	reply string
}

// accept judges each update, stores the accepted ones in the inbox and
// queues them. It returns the offset that confirms the whole batch, or an
// error (and no offset) if the inbox could not store one.
func (a *Adapter) accept(ctx context.Context, ups []update) (int64, error) {
	a.mu.Lock()
	self, pool := a.bot.Self, a.pool
	a.mu.Unlock()
	var next int64
	for _, u := range ups {
		it, ok := a.judge(ctx, self, pool, u)
		if ok {
			route, err := json.Marshal(it.route)
			if err != nil {
				return 0, err
			}
			fresh, err := a.inbox.TelegramAccept(ctx, it.id, it.in.ChatKey, it.in.UserKey, it.in.Text, string(route))
			if err != nil {
				return 0, fmt.Errorf("store update %d: %w", it.id, err)
			}
			if fresh && !pool.Submit(it.in.ChatKey, a.job(it)) {
				a.log.Info("telegram: shutting down; message kept for the next start", "update_id", it.id)
			}
		}
		next = max(next, u.UpdateID+1)
	}
	return next, nil
}

// judge decides whether an update is a message for the bot from an
// allowed person. Strangers addressing the bot get one refusal.
func (a *Adapter) judge(ctx context.Context, self tgbotapi.User, pool *bridge.Pool, u update) (item, bool) {
	m := u.Message
	if m == nil || m.From == nil || m.Chat == nil || m.From.IsBot || strings.TrimSpace(m.Text) == "" {
		return item{}, false
	}
	text := m.Text
	r := routeInfo{ChatID: m.Chat.ID}
	chatKey := "telegram:" + strconv.FormatInt(m.Chat.ID, 10)
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		r.ThreadID = m.MessageThreadID
		chatKey += ":" + strconv.Itoa(m.MessageThreadID)
	}
	switch m.Chat.Type {
	case "private":
	case "group", "supergroup":
		var ok bool
		if text, ok = addressed(self, m); !ok {
			return item{}, false
		}
		r.ReplyTo = m.MessageID
	default:
		return item{}, false
	}
	id := strconv.FormatInt(m.From.ID, 10)
	if !a.allow.Allowed(id, m.From.UserName) {
		username := "(none)"
		if m.From.UserName != "" {
			username = "@" + m.From.UserName
		}
		a.log.Warn("telegram: refused a message from a user who is not allowed; to allow them, add their id or @username to telegram.allowed_users",
			"user_id", id, "username", username, "name", strings.TrimSpace(m.From.FirstName+" "+m.From.LastName),
			"chat_id", m.Chat.ID)
		if a.allow.FirstRefusal(id) {
			pool.Submit(chatKey, func(ctx context.Context) {
				if err := a.sendText(ctx, r, bridge.TextRefused, ""); err != nil && ctx.Err() == nil {
					a.log.Error("telegram: could not send the refusal", "user_id", id, "err", err)
				}
			})
		}
		return item{}, false
	}
	return item{
		id:    u.UpdateID,
		in:    chat.Inbound{ChatKey: chatKey, UserKey: "telegram:" + id, Text: text, ID: updateRef(u.UpdateID)},
		route: r,
	}, true
}

// addressed reports whether a group message is for the bot: it mentions
// the bot, replies to it, or is a command (not one addressed to another
// bot). It returns the text with the mention removed.
func addressed(self tgbotapi.User, m *message) (string, bool) {
	text := m.Text
	if name, _, ok := bridge.ParseCommand(text); ok && name != "" {
		head, _, _ := strings.Cut(strings.TrimSpace(text), " ")
		if _, to, has := strings.Cut(head, "@"); has && !strings.EqualFold(to, self.UserName) {
			return "", false
		}
		return text, true
	}
	mentioned := false
	units := utf16.Encode([]rune(text))
	var keep []uint16
	last := 0
	for _, e := range m.Entities {
		if e.Offset < last || e.Offset+e.Length > len(units) {
			continue
		}
		seg := string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
		if (e.Type == "mention" && strings.EqualFold(seg, "@"+self.UserName)) ||
			(e.Type == "text_mention" && e.User != nil && e.User.ID == self.ID) {
			mentioned = true
			if e.Type == "mention" {
				keep = append(keep, units[last:e.Offset]...)
				last = e.Offset + e.Length
			}
		}
	}
	if !mentioned && strings.Contains(strings.ToLower(text), "@"+strings.ToLower(self.UserName)) && len(m.Entities) == 0 {
		mentioned = true
	}
	replied := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == self.ID &&
		!(m.IsTopicMessage && m.ReplyToMessage.MessageID == m.MessageThreadID)
	if !mentioned && !replied {
		return "", false
	}
	if last > 0 {
		keep = append(keep, units[last:]...)
		if stripped := strings.Join(strings.Fields(string(utf16.Decode(keep))), " "); stripped != "" {
			text = stripped
		}
	}
	return text, true
}

// job answers one accepted message. The answer is stored before it is
// sent; the inbox entry is marked done only after the reply went out (or
// failed for good). When the pool cancels the context at shutdown, the
// entry stays pending and is answered after the next start.
func (a *Adapter) job(it item) func(ctx context.Context) {
	return func(ctx context.Context) {
		log := a.log.With("update_id", it.id, "chat", it.in.ChatKey)
		stopTyping := a.typing(ctx, it.route)
		defer stopTyping()
		store := context.WithoutCancel(ctx)
		reply := it.reply
		if reply == "" {
			text, err := a.router.Handle(ctx, it.in)
			if ctx.Err() != nil {
				// The engine answers a cancelled turn with an apology;
				// the message is answered properly after the next start.
				log.Info("telegram: turn interrupted by shutdown; it will be answered after the next start")
				return
			}
			if err != nil {
				log.Error("telegram: message failed", "err", err)
				text = bridge.TextFailed
			}
			reply = text
			if err := a.inbox.TelegramAnswered(store, it.id, reply); err != nil {
				log.Error("telegram: could not store the answer", "err", err)
			}
		}
		if err := a.sendReply(ctx, it.route, reply); err != nil {
			if ctx.Err() != nil {
				log.Info("telegram: reply interrupted by shutdown; it will be sent after the next start")
				return
			}
			log.Error("telegram: reply could not be sent", "err", err)
		}
		stopTyping()
		if err := a.inbox.TelegramDone(store, it.id); err != nil {
			log.Error("telegram: could not mark the message done", "err", err)
		}
	}
}

// typing shows "typing…" in the chat until the returned stop is called.
// stop waits for the renewal loop to end and may be called more than once.
func (a *Adapter) typing(ctx context.Context, r routeInfo) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := tgbotapi.Params{"chat_id": strconv.FormatInt(r.ChatID, 10), "action": tgbotapi.ChatTyping}
		p.AddNonZero("message_thread_id", r.ThreadID)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := a.request(ctx, "sendChatAction", p); err != nil && ctx.Err() == nil {
				a.optionalFailed("sendChatAction", err)
			}
			t.Reset(a.cfg.TypingInterval)
		}
	}()
	return func() { cancel(); <-done }
}

// sendReply sends md as Telegram HTML in chunks of at most MaxMessage, in
// order. A chunk whose formatting Telegram rejects is sent again as plain
// text.
func (a *Adapter) sendReply(ctx context.Context, r routeInfo, md string) error {
	for _, chunk := range Chunks(md, MaxMessage) {
		err := a.sendText(ctx, r, HTML(chunk), "HTML")
		if isParseError(err) {
			a.log.Warn("telegram: formatting rejected; sending the text plain", "err", err)
			err = a.sendText(ctx, r, chunk, "")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Chunks splits Markdown into pieces that fit one message: bridge.Split,
// with pieces cut again if they are too long in UTF-16 units, which is how
// Telegram counts.
func Chunks(md string, limit int) []string {
	return chunks(md, limit, limit)
}

// chunks splits md at size runes, and splits again, smaller, every piece
// longer than limit UTF-16 units.
func chunks(md string, limit, size int) []string {
	var out []string
	for _, c := range bridge.Split(md, size) {
		n := len(utf16.Encode([]rune(c)))
		if n <= limit || size <= 32 {
			out = append(out, c)
			continue
		}
		smaller := size * limit / n
		if smaller >= size {
			smaller = size - 1
		}
		out = append(out, chunks(c, limit, smaller)...)
	}
	return out
}

func (a *Adapter) sendText(ctx context.Context, r routeInfo, text, parseMode string) error {
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(r.ChatID, 10), "text": text}
	p.AddNonEmpty("parse_mode", parseMode)
	p.AddNonZero("message_thread_id", r.ThreadID)
	if r.ReplyTo != 0 {
		p.AddNonZero("reply_to_message_id", r.ReplyTo)
		p.AddBool("allow_sending_without_reply", true)
	}
	p.AddBool("disable_web_page_preview", true)
	_, err := a.call(ctx, "sendMessage", p)
	return err
}

func isParseError(err error) bool {
	var te *tgbotapi.Error
	return errors.As(err, &te) && te.Code == http.StatusBadRequest &&
		strings.Contains(strings.ToLower(te.Message), "can't parse entities")
}

// ServeHTTP receives webhook updates. A request without the configured
// secret in X-Telegram-Bot-Api-Secret-Token is rejected with 401. An
// update is answered 200 once it is in the inbox; a store failure answers
// 500 so Telegram delivers it again.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
	if a.cfg.WebhookSecret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.WebhookSecret)) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a.mu.Lock()
	ready := a.pool != nil
	a.mu.Unlock()
	if !ready {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	var u update
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&u); err != nil {
		http.Error(w, "bad update", http.StatusBadRequest)
		return
	}
	if _, err := a.accept(r.Context(), []update{u}); err != nil {
		a.log.Error("telegram: could not store a webhook update", "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// doer binds every request of the client library to a context, which the
// library itself does not do.
type doer struct {
	ctx context.Context
	c   *http.Client
}

func (d doer) Do(req *http.Request) (*http.Response, error) {
	return d.c.Do(req.WithContext(d.ctx))
}

// backoff doubles from one second up to max.
type backoff struct {
	max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = time.Second
	} else {
		b.cur *= 2
	}
	if b.max > 0 && b.cur > b.max {
		b.cur = b.max
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// updateRef names an update for the engine, so a turn re-run after a crash
// does not record the person's message twice.
func updateRef(id int64) string { return "telegram:update:" + strconv.FormatInt(id, 10) }
