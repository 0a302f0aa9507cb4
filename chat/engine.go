package chat

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"loadout/tools"
)

// Routing modes.
const (
	// RoutingGroups sends core tools plus loaded groups (the default).
	RoutingGroups = "groups"
	// RoutingAll sends every tool schema on every call.
	RoutingAll = "all"
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
				return Reply{Text: last.Text, Ask: askOf(last)}, nil
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
	settings, err := e.settings(ctx, in.ChatKey)
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
	reply, err := t.run(ctx)
	// Pictures go with their own turn only: the history keeps the text.
	if t.current >= 0 && t.current < len(t.history) {
		t.history[t.current].Images = nil
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

// turn is the state of one Handle call.
type turn struct {
	e        *Engine
	sess     Session
	in       Inbound
	history  []Message
	current  int // index of this turn's user message in history
	loaded   []string
	settings tools.Settings
	failures map[string]int
	usage    Usage
	count    int // messages persisted in the session so far
	// unsaved is the person's message until the turn's first record is
	// written with it.
	unsaved *Message
	// ask is the approval the turn ends with, when a call was held.
	ask *Approval
	// tainted is set once the turn has read untrusted content: its
	// mutating and destructive calls then wait for approval
	// (tools.Policy.AfterUntrusted).
	tainted bool
}

// record persists msgs (after the person's message, if that is not
// written yet) in one transaction, even when ctx was cut at shutdown: a
// turn is never left half-recorded.
func (t *turn) record(ctx context.Context, msgs []Message, usage Usage) error {
	if t.unsaved != nil {
		msgs = append([]Message{*t.unsaved}, msgs...)
	}
	if len(msgs) == 0 {
		return nil
	}
	var err error
	if t.ask != nil {
		err = t.e.store.Hold(context.WithoutCancel(ctx), t.sess.ID, msgs, usage, *t.ask)
	} else {
		err = t.e.store.Append(context.WithoutCancel(ctx), t.sess.ID, msgs, usage)
	}
	if err != nil {
		return err
	}
	t.unsaved = nil
	t.count += len(msgs)
	return nil
}

func (t *turn) run(ctx context.Context) (Reply, error) {
	e := t.e
	for round := 0; ; round++ {
		if round >= e.cfg.MaxToolRounds {
			return t.finish(ctx, fmt.Sprintf(
				"I stopped after %d rounds of tool calls without reaching an answer. Tell me how you'd like to continue, or narrow the request.", round))
		}
		cat := e.catalog(t.loaded, t.settings.Disabled)
		req := Request{
			Model:  firstNonEmpty(t.settings.Model, e.cfg.Model),
			Tools:  cat.Definitions(),
			OnText: t.in.OnText,
		}
		system := e.systemPrompt(ctx, t.settings, t.in)
		// The budget is in the model's tokens; the estimates are scaled to
		// it by what this model reported before.
		sysTokens := e.cfg.Count(system)
		budget := int(float64(e.cfg.HistoryTokens)/e.ratio(ctx, req.Model)) - sysTokens
		buf := e.buffers.Get().(*[]Message)
		req.Messages = trimHistory(*buf, t.history, t.current, budget, e.cfg.ToolResultChars, Message{Role: RoleSystem, Text: system})
		hideOthers(req.Messages, t.in.UserKey)
		if len(req.Messages) == 0 {
			req.Messages = []Message{{Role: RoleSystem, Text: system}}
		}

		resp, err := e.model.Complete(ctx, req)
		if err != nil {
			// The person's message is kept, as the sentence says.
			if err := t.record(ctx, nil, Usage{}); err != nil {
				return Reply{}, fmt.Errorf("persist message of session %d: %w", t.sess.ID, err)
			}
			return Reply{Text: t.modelFailed(ctx, round, req.Model, err), Usage: t.usage}, nil
		}
		estimated := sysTokens + e.schemaTokens(req.Tools)
		for _, m := range req.Messages[1:] {
			estimated += m.Tokens
		}
		// The model is done with the request (Model.Complete keeps
		// nothing of it), so its buffer serves the next one; cleared
		// first, so it holds no texts alive.
		clear(req.Messages)
		*buf = req.Messages[:0]
		e.buffers.Put(buf)
		e.observe(ctx, req.Model, estimated, resp.Usage.PromptTokens)
		t.usage = t.usage.Add(resp.Usage)
		if len(resp.ToolCalls) == 0 {
			text := resp.Text
			if strings.TrimSpace(text) == "" {
				text = "(I have nothing to add.)"
			}
			return t.finishWith(ctx, text, resp.Usage)
		}

		stop, err := t.runTools(ctx, cat, t.settings.Disabled, resp)
		if err != nil {
			return Reply{}, err
		}
		if t.ask != nil {
			// The turn ends with the question runTools recorded; the
			// answer carries it on.
			return Reply{Text: t.history[len(t.history)-1].Text, Ask: t.ask.ID, Usage: t.usage}, nil
		}
		if stop != "" {
			return t.finish(ctx, stop)
		}
	}
}

// modelFailed logs a failed model call for the operator, naming the key to
// fix when it is a setup fault, and returns the sentence for the person.
func (t *turn) modelFailed(ctx context.Context, round int, model string, err error) string {
	log := t.e.cfg.Logger.With("chat", t.in.ChatKey, "session", t.sess.ID, "round", round)
	switch {
	case ctx.Err() != nil:
		log.Warn("model call cut short by shutdown", "err", err)
		return msgCanceled
	case errors.Is(err, ErrModelKey):
		log.Error("the model service rejected the API key: check llm.api_key (and llm.base_url)", "err", err)
		return msgModelKey
	case errors.Is(err, ErrModelUnknown):
		where := "llm.model"
		if t.settings.Model != "" {
			where = "this chat's model setting (agent_config), which overrides llm.model"
		}
		log.Error("the model service does not know the model: check "+where, "model", model, "err", err)
		return msgModelName
	}
	log.Error("model call failed", "err", err)
	return msgModelDown
}

// runTools executes one round of tool calls, persists the assistant
// message with its results, widens the catalog after successful loads and
// reports a stop sentence when the same failing call has repeated too often.
func (t *turn) runTools(ctx context.Context, cat *tools.Catalog, disabled map[string]bool, resp Response) (string, error) {
	e := t.e
	calls := make([]tools.Call, len(resp.ToolCalls))
	for i, c := range resp.ToolCalls {
		if c.ID == "" {
			resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", len(t.history), i)
		}
		calls[i] = tools.Call{ID: resp.ToolCalls[i].ID, Name: c.Name, Arguments: c.Arguments}
	}
	tctx := tools.WithCaller(ctx, tools.Caller{
		ChatKey: t.in.ChatKey, UserKey: t.in.UserKey, SessionID: t.sess.ID, Disabled: disabled,
		Loaded: slices.Clone(t.loaded), Unattended: t.in.Unattended, Tainted: t.tainted,
	})
	run := calls[:min(len(calls), e.cfg.MaxToolCalls)]
	results := append(e.exec.Run(tctx, cat, run), skipped(calls[len(run):], len(calls), e.cfg.MaxToolCalls)...)
	for _, r := range results {
		if r.Untrusted {
			t.tainted = true
		}
	}
	ask := t.holdRound(results)

	asst := Message{Role: RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}
	asst.Tokens = e.countMessage(asst)
	msgs := []Message{asst}
	stop := ""
	settingsChanged := false
	changed := -1 // index in msgs of the last result that changed the groups
	for i, r := range results {
		m := Message{
			Role: RoleTool, Text: r.Content, ToolCallID: r.CallID, ToolName: r.Name,
			Status: r.Status, Code: r.Code, Arguments: calls[i].Arguments,
		}
		if r.Personal {
			m.UserKey = t.in.UserKey
		}
		m.Tokens = e.countMessage(m)
		if r.Status == tools.StatusSuccess {
			if len(r.Groups) > 0 {
				// One row records a call's changes (find_tools may load
				// several); the store applies them again in order.
				m.Group = strings.Join(r.Groups, ",")
				t.loaded = tools.ApplyGroupChanges(t.loaded, r.Groups)
				changed = len(msgs)
			} else if tl, ok := e.reg.Tool(r.Name); ok && tl.WritesSettings {
				settingsChanged = true
			}
		} else if r.Status == tools.StatusError && r.Code != tools.CodeTooManyCalls {
			// Arguments compare in their checked form (keys in another
			// order are the same call), or, refused, without spacing.
			key := r.Name + "\x00" + cmp.Or(r.Input, compact(calls[i].Arguments))
			t.failures[key]++
			if t.failures[key] >= e.cfg.RepeatLimit && stop == "" {
				stop = fmt.Sprintf("I stopped: %s failed %d times in a row with the same input, so trying again won't help. Please check the request and try again.",
					r.Name, t.failures[key])
			}
		}
		msgs = append(msgs, m)
	}
	if changed >= 0 {
		t.keepBudget(msgs, changed)
	}
	if ask != nil {
		// The question is recorded with the round and the approval, in
		// one transaction: a turn resumed after a crash finds it.
		q := Message{Role: RoleAssistant, Text: question(*ask, e.cfg.ConfirmTTL), Code: askCode + ask.ID}
		q.Tokens = e.countMessage(q)
		msgs = append(msgs, q)
		t.ask = ask
	}
	// Once a round has run, its record is written even if ctx was cut at
	// shutdown.
	if err := t.record(ctx, msgs, resp.Usage); err != nil {
		return "", fmt.Errorf("persist tool round of session %d: %w", t.sess.ID, err)
	}
	t.history = append(t.history, msgs...)
	if settingsChanged {
		s, err := e.settings(context.WithoutCancel(ctx), t.in.ChatKey)
		if err != nil {
			return "", err
		}
		t.settings = s
	}
	return stop, nil
}

// skipped answers the calls of a response beyond the limit without running
// them: every call needs a result, and the model learns to batch.
func skipped(calls []tools.Call, asked, limit int) []tools.Result {
	if len(calls) == 0 {
		return nil
	}
	content := (&tools.Error{
		Code:       tools.CodeTooManyCalls,
		Message:    fmt.Sprintf("Not run: the response asked for %d tool calls and at most %d run per response.", asked, limit),
		Suggestion: fmt.Sprintf("Batch the work: at most %d calls per response (use a tool's list or filter parameters where it has them), then continue with the rest.", limit),
	}).JSON()
	out := make([]tools.Result, len(calls))
	for i, c := range calls {
		out[i] = tools.Result{CallID: c.ID, Name: c.Name, Status: tools.StatusError, Code: tools.CodeTooManyCalls, Content: content}
	}
	return out
}

// finish persists a reply the engine wrote itself (a guard's sentence).
func (t *turn) finish(ctx context.Context, text string) (Reply, error) {
	return t.finishWith(ctx, text, Usage{})
}

func (t *turn) finishWith(ctx context.Context, text string, usage Usage) (Reply, error) {
	m := Message{Role: RoleAssistant, Text: text}
	m.Tokens = t.e.countMessage(m)
	if err := t.record(ctx, []Message{m}, usage); err != nil {
		return Reply{}, fmt.Errorf("persist reply of session %d: %w", t.sess.ID, err)
	}
	t.history = append(t.history, m)
	return Reply{Text: text, Usage: t.usage}, nil
}

// readUntrusted reports whether msgs hold a successful result of a tool
// whose results are untrusted.
func (e *Engine) readUntrusted(msgs []Message) bool {
	for _, m := range msgs {
		if m.Role == RoleTool && m.Status == tools.StatusSuccess {
			// A tool that decides per call is taken as untrusted: the
			// call is not decoded again to ask.
			if tl, ok := e.reg.Tool(m.ToolName); ok && (tl.Untrusted || tl.UntrustedFor != nil) {
				return true
			}
		}
	}
	return false
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

// Clear closes the chat's open session; the next message opens a new one
// with no groups loaded. It reports whether a session was open.
func (e *Engine) Clear(ctx context.Context, chatKey string) (bool, error) {
	return e.store.CloseSession(ctx, chatKey)
}

// Name is the assistant's name in the chat: its own setting, else the
// configured one.
func (e *Engine) Name(ctx context.Context, chatKey string) (string, error) {
	settings, err := e.settings(ctx, chatKey)
	if err != nil {
		return "", err
	}
	return firstNonEmpty(settings.Name, e.cfg.Name), nil
}

// Status describes a chat's open session.
type Status struct {
	OpenedAt time.Time
	Messages int
	Loaded   []string
	// Groups are the loaded groups in load order with what their schemas
	// cost on every request.
	Groups []GroupCost
	// ActiveTools and SchemaTokens are what one request carries now;
	// CoreTokens is the core tools' part of it.
	ActiveTools  int
	SchemaTokens int
	CoreTokens   int
	// AllTools and AllTokens are what routing: all would send.
	AllTools  int
	AllTokens int
	Usage     Usage
	Model     string
	Routing   string
	// Approvals are the calls waiting for the person's answer.
	Approvals []Approval
}

// GroupCost is a loaded group's share of a request.
type GroupCost struct {
	Name   string
	Tools  int
	Tokens int
}

// Status reports on the chat's open session, opening one if none is.
func (e *Engine) Status(ctx context.Context, chatKey string) (Status, error) {
	sess, err := e.store.OpenSession(ctx, chatKey)
	if err != nil {
		return Status{}, fmt.Errorf("open session for %s: %w", chatKey, err)
	}
	loaded, err := e.store.LoadedGroups(ctx, sess.ID)
	if err != nil {
		return Status{}, fmt.Errorf("read loaded groups of session %d: %w", sess.ID, err)
	}
	settings, err := e.settings(ctx, chatKey)
	if err != nil {
		return Status{}, err
	}
	cat := e.catalog(loaded, settings.Disabled)
	all := e.reg.All(settings.Disabled)
	s := Status{
		OpenedAt:     sess.OpenedAt,
		Messages:     sess.Messages,
		Loaded:       cat.Loaded(),
		ActiveTools:  len(cat.Definitions()),
		SchemaTokens: tools.SchemaTokens(cat.Definitions(), e.cfg.Exact),
		CoreTokens:   tools.SchemaTokens(e.reg.Core(settings.Disabled), e.cfg.Exact),
		AllTools:     len(all),
		AllTokens:    tools.SchemaTokens(all, e.cfg.Exact),
		Usage:        sess.Usage,
		Model:        firstNonEmpty(settings.Model, e.cfg.Model),
		Routing:      e.cfg.Routing,
	}
	if s.Approvals, err = e.store.PendingApprovals(ctx, chatKey); err != nil {
		return Status{}, fmt.Errorf("read approvals of %s: %w", chatKey, err)
	}
	if e.cfg.Routing != RoutingAll {
		for _, g := range cat.Loaded() {
			defs := e.reg.GroupTools(g, settings.Disabled)
			s.Groups = append(s.Groups, GroupCost{Name: g, Tools: len(defs), Tokens: tools.SchemaTokens(defs, e.cfg.Exact)})
		}
	}
	return s, nil
}

// compact is JSON text without its spacing; other text trimmed.
func compact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return strings.TrimSpace(s)
	}
	return b.String()
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

// images reads the pictures of in for a model that sees them; one that
// cannot be read is left out, with the text still saying it was sent.
func (e *Engine) images(ctx context.Context, in Inbound) []Image {
	if e.cfg.Images == nil || len(in.Images) == 0 {
		return nil
	}
	var out []Image
	for _, name := range in.Images {
		img, err := e.cfg.Images(ctx, in.ChatKey, name)
		if err != nil {
			e.cfg.Logger.Warn("a picture the person sent could not be read for the model", "name", name, "err", err)
			continue
		}
		out = append(out, img)
	}
	return out
}
