package chat

import (
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"loadout/tools"
)

// Routing modes.
const (
	// RoutingGroups sends core tools plus loaded groups (the default).
	RoutingGroups = tools.RoutingGroups
	// RoutingAll sends every tool schema on every call.
	RoutingAll = tools.RoutingAll
)

// Config configures an Engine. The zero value of each field is its
// documented default.
type Config struct {
	// Name is the assistant's name; a chat may override it.
	Name string `yaml:"-"`
	// SystemPrompt is the agent prompt; a chat may override it.
	SystemPrompt string `yaml:"-"`
	// Model is the model name sent with each request; a chat may override it.
	Model string `yaml:"model"`
	// MaxToolRounds bounds the model calls of one turn. Default 20.
	MaxToolRounds int `yaml:"max_tool_rounds"`
	// MaxToolCalls bounds the tool calls run from one model response; the
	// calls beyond it are not run and get an error asking the model to
	// batch. Default 32.
	MaxToolCalls int `yaml:"max_tool_calls"`
	// Routing is RoutingGroups (default) or RoutingAll.
	Routing string `yaml:"-"`
	// Confirm says which tool calls wait for the person's approval;
	// ConfirmTTL is how long a question waits (default 10m).
	Confirm    tools.Policy  `yaml:"-"`
	ConfirmTTL time.Duration `yaml:"-"`
	// Rules are the operator's rules (tools.rules), checked with
	// tools.CheckRules: they decide everyone's calls, and a person's own
	// rule cannot loosen them.
	Rules []tools.Rule `yaml:"-"`
	// Admins may read every decision of a chat's audit trail (/audit);
	// anyone else reads those on their own calls.
	Admins tools.Admins `yaml:"-"`
	// CatalogBudget bounds, in tokens, the schemas of a session's loaded
	// groups: a load beyond it unloads the least recently used groups.
	// Zero means no bound.
	CatalogBudget int `yaml:"-"`
	// HistoryTokens bounds the history sent to the model. Default 16000.
	HistoryTokens int `yaml:"history_tokens"`
	// HistoryMessages bounds how many recent messages are read from the
	// store before trimming. Default 400.
	HistoryMessages int `yaml:"history_messages"`
	// ToolResultChars caps tool results of earlier turns when they are sent
	// again. Default 2000.
	ToolResultChars int `yaml:"tool_result_chars"`
	// ToolResultMaxChars caps any tool result when it is made, with a note
	// to the model that it was cut. Default 32000.
	ToolResultMaxChars int `yaml:"tool_result_max_chars"`
	// CachedSessions is how many sessions keep their recent history in
	// memory between messages. Default 256; negative disables the cache.
	CachedSessions int `yaml:"cached_sessions"`
	// RepeatLimit is how often the same failing call may occur in one turn
	// before the turn stops. Default 3.
	RepeatLimit int `yaml:"repeat_limit"`
	// Count estimates tokens for budgeting and trimming history; it runs
	// on every message, so it must be fast and linear (tokens.Estimate).
	// Default four bytes a token.
	Count func(string) int `yaml:"-"`
	// Exact counts tokens where a person reads the figure (/status);
	// default Count.
	Exact func(string) int `yaml:"-"`
	// Logger defaults to slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Middleware wraps every tool call, outermost first.
	Middleware []tools.Middleware `yaml:"-"`
	// Sections add to the system prompt, after the group listing, in
	// order: a skills listing, what is remembered about the person. One
	// returning "" adds nothing.
	Sections []func(ctx context.Context, in Inbound) string `yaml:"-"`
	// Images, when set, reads a picture of a chat's workspace for a
	// model that reads images (llm.vision): the turn's message carries
	// the pictures named in Inbound.Images.
	Images func(ctx context.Context, chatKey, name string) (Image, error) `yaml:"-"`
	// Prices are what each model costs (llm.prices), by model name: a
	// model without one is priced at the dearest listed, so a cap in
	// money is never passed by a model left out.
	Prices map[string]Price `yaml:"prices"`
	// Limits are the spend caps (the limits section).
	Limits Limits `yaml:"-"`
	// Ledger, when set, counts every model call's spend per person, chat
	// and day, and Limits are checked against it; nil counts nothing
	// and caps nothing.
	Ledger Ledger `yaml:"-"`
	// Charged, when set, is told each charge once the ledger holds it
	// (the spend metrics).
	Charged func(Charge) `yaml:"-"`
	// Delegation bounds sub-agents (the agent section's keys); the
	// process adds the delegate tool (DelegateTool) to the registry.
	Delegation DelegateConfig `yaml:"-"`
	// OnClear are told, in order, of each chat cleared (Clear), once its
	// session is closed: what a tool holds for the chat (a browser and
	// its profile) ends with it.
	OnClear []func(ctx context.Context, chatKey string) `yaml:"-"`
}

func (c *Config) setDefaults() {
	if c.MaxToolRounds <= 0 {
		c.MaxToolRounds = 20
	}
	if c.MaxToolCalls <= 0 {
		c.MaxToolCalls = 32
	}
	if c.Routing == "" {
		c.Routing = RoutingGroups
	}
	if c.HistoryTokens <= 0 {
		c.HistoryTokens = 16000
	}
	if c.HistoryMessages <= 0 {
		c.HistoryMessages = 400
	}
	if c.ToolResultMaxChars <= 0 {
		c.ToolResultMaxChars = 32000
	}
	if c.ToolResultChars <= 0 {
		c.ToolResultChars = 2000
	}
	if c.CachedSessions == 0 {
		c.CachedSessions = 256
	}
	if c.RepeatLimit <= 0 {
		c.RepeatLimit = 3
	}
	if c.ConfirmTTL <= 0 {
		c.ConfirmTTL = defaultConfirmIn
	}
	if c.Count == nil {
		c.Count = func(s string) int { return (len(s) + 3) / 4 }
	}
	if c.Exact == nil {
		c.Exact = c.Count
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Delegation.setDefaults()
}

// Engine handles messages. It is safe for concurrent use across chats;
// one chat's messages must be handed to it one at a time (see Handle).
type Engine struct {
	cfg    Config
	model  Model
	store  Store
	reg    *tools.Registry
	exec   *tools.Executor
	cache  *historyCache
	ratios ratios
	// buffers hold request message slices between model calls.
	buffers sync.Pool
	// charging is the store when it is the Ledger and can count a
	// round's charge in the transaction that records the round.
	charging ChargingStore
	// unpriced holds the models a charge found without a price, each
	// logged once.
	unpriced sync.Map
	// system is the last system prompt counted and its count: the
	// prompt rarely changes between turns and chats, and counting it
	// was a twentieth of a turn's processor time.
	system atomic.Pointer[counted]
	// running are the sub-agents running now, for /status.
	running runningDelegates
}

// counted is a text and its token count.
type counted struct {
	text   string
	tokens int
}

// countSystem counts a system prompt, once while it stays the same.
func (e *Engine) countSystem(system string) int {
	if c := e.system.Load(); c != nil && c.text == system {
		return c.tokens
	}
	n := e.cfg.Count(system)
	e.system.Store(&counted{system, n})
	return n
}

// New returns an engine. reg must already hold every tool and group,
// including tools.LoadGroup(reg).
func New(cfg Config, model Model, store Store, reg *tools.Registry) *Engine {
	cfg.setDefaults()
	mw := append([]tools.Middleware{tools.Logging(cfg.Logger)}, cfg.Middleware...)
	mw = append(mw, tools.CapResults(cfg.ToolResultMaxChars))
	e := &Engine{
		cfg:     cfg,
		model:   model,
		store:   store,
		reg:     reg,
		exec:    tools.NewExecutor(reg, cfg.Logger, mw...),
		cache:   newHistoryCache(cfg.CachedSessions),
		ratios:  ratios{byName: map[string]*ratio{}},
		buffers: sync.Pool{New: func() any { return new([]Message) }},
	}
	e.exec.SetGate(e.gate)
	if cs, ok := store.(ChargingStore); ok && cfg.Ledger != nil && any(cfg.Ledger) == any(store) {
		e.charging = cs
	}
	return e
}

// Sentences a person may see when a turn cannot finish normally.
const (
	msgModelDown = "Sorry, I can't reach the language model right now. Your message is saved; please try again in a minute."
	msgCanceled  = "Sorry, I had to stop before finishing because I'm shutting down. Your message is saved; please send it again in a moment."
	msgModelKey  = "Sorry, the assistant is misconfigured (the model service rejected its API key); the owner has been told in the log."
	msgModelName = "Sorry, the assistant is misconfigured (the model service does not know the model it is set to use); the owner has been told in the log."
)

// Handle runs one turn: it persists the message, calls the model and the
// tools until the model answers in text or a guard stops it, persists every
// step and returns the answer. A model or tool failure becomes a plain
// sentence in Reply; an error is returned only when the store fails.
//
// Handle must not run twice at once for the same chat: the delivery
// pipeline in package bridge runs each chat's messages one at a time, in
// arrival order, and is the only ordering mechanism. The engine keeps no
// lock of its own so that ordering lives in one place (and, with a shared
// database, can move out of process memory).
func (e *Engine) Handle(ctx context.Context, in Inbound) (Reply, error) {
	sess, err := e.store.OpenSession(ctx, in.ChatKey)
	if err != nil {
		return Reply{}, fmt.Errorf("open session for %s: %w", in.ChatKey, err)
	}
	user := Message{Role: RoleUser, Text: in.Text, UserKey: in.UserKey, ExternalID: in.ID, Tokens: e.cfg.Count(in.Text) + 4}
	user.Images = e.images(ctx, in)
	user.Tokens += imageTokens * len(user.Images)
	var history []Message
	current, count := -1, sess.Messages
	if in.Resume && in.ID != "" {
		// A message that may have been handled in part: find it in the
		// recent history and carry on after it.
		history, err = e.store.Recent(ctx, sess.ID, e.cfg.HistoryMessages)
		if err != nil {
			return Reply{}, fmt.Errorf("read history of session %d: %w", sess.ID, err)
		}
		for i := len(history) - 1; i >= 0; i-- {
			if history[i].ExternalID == in.ID && history[i].Role == RoleUser {
				current = i
				break
			}
		}
		if current >= 0 {
			if last, done := answered(history[current+1:]); done {
				r, err := e.answeredReply(ctx, in, last)
				r.Tainted = in.Tainted || e.readUntrusted(history[current+1:])
				return r, err
			}
		}
	}
	var unsaved *Message
	var loaded []string
	haveLoaded := false
	if current < 0 {
		// The message is written with the turn's first record (a tool
		// round or the answer), in one transaction: until then the
		// channel's inbox holds it, and a turn cut short runs again.
		unsaved = &user
		cached, groups, ok := e.cache.take(sess.ID, sess.Messages)
		switch {
		case ok:
			history, loaded, haveLoaded = cached, groups, true
		case history != nil:
		default:
			history, err = e.store.Recent(ctx, sess.ID, e.cfg.HistoryMessages)
			if err != nil {
				return Reply{}, fmt.Errorf("read history of session %d: %w", sess.ID, err)
			}
		}
		history = append(history, user)
		current = len(history) - 1
	}
	if !haveLoaded {
		loaded, err = e.store.LoadedGroups(ctx, sess.ID)
		if err != nil {
			return Reply{}, fmt.Errorf("read loaded groups of session %d: %w", sess.ID, err)
		}
	}
	settings, err := e.settings(ctx, in.chat())
	if err != nil {
		return Reply{}, err
	}
	t := &turn{
		e:        e,
		sess:     sess,
		in:       in,
		history:  history,
		current:  current,
		loaded:   loaded,
		settings: settings,
		failures: map[string]int{},
		count:    count,
		unsaved:  unsaved,
		// A picture can carry words that are not the person's; a turn
		// carried on after an answer inherits the asking turn's taint;
		// a resumed turn, what it had read before it was cut.
		tainted: in.Tainted || len(in.Images) > 0 || e.readUntrusted(history[current+1:]),
	}
	if t.allow, err = e.allowance(ctx, in.UserKey, in.chat(), &t.period); err != nil {
		return Reply{}, err
	}
	reply, err := t.run(ctx)
	reply.Tainted = t.tainted
	reply.Asks = append(reply.Asks, t.relayed...)
	// Pictures go with their own turn only: the history keeps the text.
	if t.current >= 0 && t.current < len(t.history) {
		for i := t.current; i < len(t.history); i++ {
			t.history[i].Images = nil
		}
	}
	if err != nil {
		e.cache.drop(sess.ID)
		return reply, err
	}
	e.cache.put(sess.ID, t.count, t.history, t.loaded, e.cfg.HistoryTokens, e.cfg.HistoryMessages)
	return reply, nil
}

// answered reports whether the messages recorded after a user message end
// the turn: the last is an assistant message without tool calls, the
// answer (or the question of a held call).
func answered(after []Message) (Message, bool) {
	if len(after) == 0 {
		return Message{}, false
	}
	last := after[len(after)-1]
	if last.Role != RoleAssistant || len(last.ToolCalls) > 0 {
		return Message{}, false
	}
	return last, true
}

// readUntrusted reports whether msgs hold a result of a tool whose
// results are untrusted: a success or an error, which carries the
// service's text as well. Only a call still waiting for approval has
// returned nothing.
func (e *Engine) readUntrusted(msgs []Message) bool {
	for _, m := range msgs {
		if m.Role == RoleTool && m.Status != tools.StatusPending && (e.untrustedTool(m.ToolName) || e.reg.OutsideText(m.Groups)) {
			return true
		}
	}
	return false
}

// answeredReply is the reply a turn already gave, found again when its
// message is handled a second time: its text, or the question it asked.
func (e *Engine) answeredReply(ctx context.Context, in Inbound, last Message) (Reply, error) {
	id := askOf(last)
	if id == "" {
		return Reply{Text: last.Text}, nil
	}
	asks, err := e.store.Batch(ctx, in.chat(), id)
	if err != nil {
		return Reply{}, fmt.Errorf("read the approvals asked with %s: %w", id, err)
	}
	if len(asks) == 0 {
		return Reply{Text: last.Text, Ask: id}, nil
	}
	return askReply(asks, e.cfg.ConfirmTTL, in.Unattended), nil
}

// untrustedTool reports whether a recorded result of the named tool is
// taken as untrusted. A tool that decides per call is: the call is not
// decoded again to ask.
func (e *Engine) untrustedTool(name string) bool {
	tl, ok := e.reg.Tool(name)
	return ok && (tl.Untrusted || tl.UntrustedFor != nil)
}

// catalog builds the session's active catalog.
func (e *Engine) catalog(loaded []string, disabled map[string]bool) *tools.Catalog {
	return e.reg.Catalog(e.cfg.Routing == RoutingAll, loaded, disabled)
}

// settings reads the chat's settings.
func (e *Engine) settings(ctx context.Context, chatKey string) (tools.Settings, error) {
	m, err := e.store.ChatSettings(ctx, chatKey)
	if err != nil {
		return tools.Settings{}, fmt.Errorf("read settings of %s: %w", chatKey, err)
	}
	return tools.ParseSettings(m), nil
}

// systemPrompt assembles the agent prompt and the group listing.
func (e *Engine) systemPrompt(ctx context.Context, settings tools.Settings, in Inbound) string {
	var b strings.Builder
	if name := firstNonEmpty(settings.Name, e.cfg.Name); name != "" {
		fmt.Fprintf(&b, "Your name is %s.\n\n", name)
	}
	b.WriteString(strings.TrimSpace(firstNonEmpty(settings.SystemPrompt, e.cfg.SystemPrompt)))
	if e.cfg.Routing != RoutingAll {
		if l := e.reg.Listing(settings.Disabled); l != "" {
			b.WriteString("\n\n---\n\n")
			b.WriteString(l)
		}
	}
	for _, section := range e.cfg.Sections {
		if s := strings.TrimSpace(section(ctx, in)); s != "" {
			b.WriteString("\n\n---\n\n")
			b.WriteString(s)
		}
	}
	return strings.TrimSpace(b.String())
}

// countMessage counts a message's tokens: text, tool calls and a small
// per-message overhead.
func (e *Engine) countMessage(m Message) int {
	n := 4 + e.cfg.Count(m.Text)
	for _, c := range m.ToolCalls {
		n += 4 + e.cfg.Count(c.Name) + e.cfg.Count(c.Arguments)
	}
	return n
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// imageTokens is what a picture is budgeted at: about what a detailed
// image costs at common models.
const imageTokens = 800

// imageCost is what a picture is budgeted at by its size, as vision
// models count it: 85 tokens, and 170 for each 512-pixel tile of the
// picture scaled to fit 2048×2048 and then to 768 pixels on its shorter
// side. A picture whose size cannot be read costs imageTokens.
func imageCost(data []byte) int {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return imageTokens
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if s := 2048 / max(w, h); s < 1 {
		w, h = w*s, h*s
	}
	if s := 768 / min(w, h); s < 1 {
		w, h = w*s, h*s
	}
	tiles := int(math.Ceil(w/512)) * int(math.Ceil(h/512))
	return 85 + 170*tiles
}

// images reads the pictures of in for a model that sees them; one that
// cannot be read is left out, with the text still saying it was sent.
func (e *Engine) images(ctx context.Context, in Inbound) []Image {
	if e.cfg.Images == nil || len(in.Images) == 0 {
		return nil
	}
	var out []Image
	for _, name := range in.Images {
		img, err := e.cfg.Images(ctx, in.chat(), name)
		if err != nil {
			e.cfg.Logger.Warn("a picture the person sent could not be read for the model", "name", name, "err", err)
			continue
		}
		out = append(out, img)
	}
	return out
}
