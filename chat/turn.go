package chat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"loadout/tools"
)

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
	// asks are the approvals the turn ends with, when calls were held.
	asks []Approval
	// decided keeps the decisions rules make on a round's calls while
	// they run; audit holds them until the round is recorded with them.
	decided auditRound
	audit   []AuditEntry
	// tainted is set once the turn has read untrusted content: its
	// mutating and destructive calls then wait for approval
	// (tools.Policy.AfterUntrusted).
	tainted bool
	// allow is what the person may still spend, counted down by each
	// model call; nil when they are not capped. period is the day and
	// month the turn is counted in.
	allow  *Allowance
	period period
	// charge is the last model call's, until the round's record
	// carries it into the ledger (Engine.charging).
	charge *Charge
	// delegating is what the turn's delegate calls share; relayed are
	// its sub-agents' questions, asked with its answer.
	delegating *delegating
	relayed    []Asked
}

// maxRounds bounds the turn's model calls: a sub-agent's steps.
func (t *turn) maxRounds() int {
	if d := t.in.Delegation; d != nil && d.Steps > 0 {
		return min(d.Steps, t.e.cfg.MaxToolRounds)
	}
	return t.e.cfg.MaxToolRounds
}

// disabled are the tools the turn may not call: the chat's, and
// delegate past the depth sub-agents may reach.
func (t *turn) disabled() map[string]bool {
	depth := 0
	if t.in.Delegation != nil {
		depth = t.in.Delegation.Depth
	}
	if max := t.e.cfg.Delegation.MaxDepth; depth < max || max < 0 {
		// Within the depth, or off (the tool is not registered).
		return t.settings.Disabled
	}
	out := map[string]bool{DelegateName: true}
	for k, v := range t.settings.Disabled {
		out[k] = v
	}
	return out
}

// preload loads the groups the turn starts with (Inbound.Groups) that
// are not loaded yet, with load_tool_group calls recorded as the
// model's would be: the operator's policy applies to them, and the
// session keeps them.
func (t *turn) preload(ctx context.Context) error {
	var calls []ToolCall
	for i, g := range t.in.Groups {
		if slices.Contains(t.loaded, g) || slices.Contains(t.in.Groups[:i], g) {
			continue
		}
		args, _ := json.Marshal(map[string]string{"group_name": g})
		calls = append(calls, ToolCall{ID: fmt.Sprintf("preload_%d_%d", len(t.history), i), Name: tools.LoadGroupName, Arguments: string(args)})
	}
	if len(calls) == 0 {
		return nil
	}
	_, err := t.runTools(ctx, t.e.catalog(t.loaded, t.disabled()), t.disabled(), Response{ToolCalls: calls})
	return err
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
	ctx = context.WithoutCancel(ctx)
	switch {
	case len(t.asks) > 0:
		if t.charge != nil {
			// A round that asks is rare: its charge goes on its own.
			if err := t.e.commit(ctx, *t.charge); err != nil {
				return err
			}
			t.charge = nil
		}
		err = t.e.store.Hold(ctx, t.sess.ID, msgs, usage, t.asks, t.audit...)
	case t.charge != nil:
		err = t.e.charging.AppendCharged(ctx, t.sess.ID, msgs, usage, *t.charge, t.audit...)
	default:
		err = t.e.store.Append(ctx, t.sess.ID, msgs, usage, t.audit...)
	}
	if err != nil {
		return err
	}
	t.audit = nil
	if t.charge != nil {
		t.e.charged(*t.charge)
		t.charge = nil
	}
	t.unsaved = nil
	t.count += len(msgs)
	return nil
}

func (t *turn) run(ctx context.Context) (Reply, error) {
	e := t.e
	// What the turn's calls share (a person's Google client) lives as
	// long as the turn.
	ctx = tools.WithTurn(ctx)
	if c, ok := t.reached(); ok {
		// Past a cap, the message never reaches the model.
		return t.finish(ctx, t.allow.Refusal(c))
	}
	if err := t.preload(ctx); err != nil {
		return Reply{}, err
	}
	for round := 0; ; round++ {
		if round >= t.maxRounds() {
			return t.finish(ctx, fmt.Sprintf(
				"I stopped after %d rounds of tool calls without reaching an answer. Tell me how you'd like to continue, or narrow the request.", round))
		}
		cat := e.catalog(t.loaded, t.disabled())
		req := Request{
			Model:  firstNonEmpty(t.settings.Model, e.cfg.Model),
			Tools:  cat.Definitions(),
			OnText: t.in.OnText,
		}
		system := e.systemPrompt(ctx, t.settings, t.in)
		// The budget is in the model's tokens; the estimates are scaled to
		// it by what this model reported before.
		sysTokens := e.countSystem(system)
		budget := int(float64(e.cfg.HistoryTokens)/e.ratio(ctx, req.Model)) - sysTokens
		buf := e.buffers.Get().(*[]Message)
		req.Messages = trimHistory(*buf, t.history, t.current, budget, e.cfg.ToolResultChars, Message{Role: RoleSystem, Text: system})
		HideOthers(req.Messages, t.in.UserKey)
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
		answered := cmp.Or(resp.Model, req.Model)
		e.observe(ctx, answered, estimated, resp.Usage.PromptTokens)
		t.usage = t.usage.Add(resp.Usage)
		if e.cfg.Ledger != nil {
			c := Charge{UserKey: t.in.UserKey, ChatKey: t.in.chat(), Day: t.period.day, Spend: e.spend(answered, e.spent(ctx, answered, estimated, resp))}
			if e.charging != nil {
				// Written with the round's record, which follows every
				// answer: one transaction for both.
				t.charge = &c
			} else if err := e.commit(ctx, c); err != nil {
				return Reply{}, err
			}
			if t.allow != nil {
				t.allow.add(c.Spend)
			}
		}
		if len(resp.ToolCalls) == 0 {
			text := resp.Text
			if strings.TrimSpace(text) == "" {
				text = "(I have nothing to add.)"
			}
			return t.finishWith(ctx, text, resp.Usage)
		}

		stop, err := t.runTools(ctx, cat, t.disabled(), resp)
		if err != nil {
			return Reply{}, err
		}
		if len(t.asks) > 0 {
			// The turn ends with the question runTools recorded; the
			// answers carry it on.
			r := askReply(t.asks, e.cfg.ConfirmTTL, t.in.Unattended)
			r.Usage = t.usage
			return r, nil
		}
		if stop != "" {
			return t.finish(ctx, stop)
		}
		if t.allow != nil {
			// Read again, now that the round's charge is written: the
			// person's turns in other chats, and this round's tools (an
			// MCP server's sampling), spend from the same caps.
			if t.allow, err = e.allowance(ctx, t.in.UserKey, t.in.chat(), &t.period); err != nil {
				return Reply{}, err
			}
		}
		if c, ok := t.reached(); ok {
			// The step that crossed a cap has finished; the turn stops.
			return t.finish(ctx, t.allow.Stopped(c))
		}
	}
}

// delegates is what the turn gives its delegate calls.
func (t *turn) delegates() *delegating {
	d := &delegating{chat: t.in.chat(), session: t.sess.ID, message: t.in.ID,
		places: make(chan struct{}, t.e.cfg.Delegation.MaxParallel)}
	if t.in.Delegation != nil {
		d.depth = t.in.Delegation.Depth
	}
	if d.message == "" {
		// A message without an id is never run again: its sub-agents
		// need only differ from other turns'.
		d.message = "turn:" + tools.RandomCode(12)
	}
	return d
}

// reached returns the first cap the person has used up, if any.
func (t *turn) reached() (Cap, bool) {
	if t.allow == nil {
		return Cap{}, false
	}
	return t.allow.Reached()
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
	tctx := ctx
	if slices.ContainsFunc(calls, func(c tools.Call) bool { return c.Name == DelegateName }) {
		// Made for a round that delegates: the others pay nothing.
		if t.delegating == nil {
			t.delegating = t.delegates()
		}
		t.delegating.tainted = t.tainted
		tctx = context.WithValue(ctx, delegatingKey{}, t.delegating)
	}
	tctx = tools.WithCaller(context.WithValue(e.withRules(tctx, t.in.UserKey), auditKey{}, &t.decided), tools.Caller{
		ChatKey: t.in.chat(), UserKey: t.in.UserKey, SessionID: t.sess.ID, Disabled: disabled,
		Loaded: slices.Clone(t.loaded), Tainted: t.tainted,
	})
	run := calls[:min(len(calls), e.cfg.MaxToolCalls)]
	results := append(e.exec.Run(tctx, cat, run), skipped(calls[len(run):], len(calls), e.cfg.MaxToolCalls)...)
	for _, r := range results {
		if r.Untrusted {
			t.tainted = true
		}
	}
	if d := t.delegating; d != nil {
		d.mu.Lock()
		t.relayed = append(t.relayed, d.asked...)
		d.asked = nil
		d.mu.Unlock()
	}
	asks := t.holdRound(results)
	t.audit = append(t.audit, t.decided.take()...)

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
		if e.cfg.Images != nil {
			// Pictures a tool returned go to a model that reads images,
			// in this turn only, each budgeted by its size.
			for _, img := range r.Images {
				m.Images = append(m.Images, Image{MIME: img.MIME, Data: img.Data})
				m.Tokens += imageCost(img.Data)
			}
		}
		if r.Status == tools.StatusSuccess {
			if len(r.Groups) > 0 {
				// One message records a call's changes (find_tools may
				// load several); the store applies them again in order.
				m.Groups = slices.Clone(r.Groups)
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
	if len(asks) > 0 {
		// The question is recorded with the round and the approvals, in
		// one transaction: a turn resumed after a crash finds it.
		q := Message{Role: RoleAssistant, Text: questionText(askReply(asks, e.cfg.ConfirmTTL, t.in.Unattended)), Ask: asks[0].ID}
		q.Tokens = e.countMessage(q)
		msgs = append(msgs, q)
		t.asks = asks
	}
	// Once a round has run, its record is written even if ctx was cut at
	// shutdown.
	if err := t.record(ctx, msgs, resp.Usage); err != nil {
		return "", fmt.Errorf("persist tool round of session %d: %w", t.sess.ID, err)
	}
	t.history = append(t.history, msgs...)
	if settingsChanged {
		s, err := e.settings(context.WithoutCancel(ctx), t.in.chat())
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
