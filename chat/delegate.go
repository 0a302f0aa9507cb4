package chat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"loadout/config"
	"loadout/tools"
)

// DelegateName is the core tool that runs a task as a sub-agent.
const DelegateName = "delegate"

// Delegation is a sub-agent's turn: the task a parent turn's delegate
// call gave it. The sub-agent acts as the same person in the same chat
// (their Google account, memory, rules, approvals, caps, audit trail,
// files); only its session is its own.
type Delegation struct {
	// Chat is the person's chat, where its approvals are asked and its
	// calls run as from.
	Chat string `json:"chat"`
	// Key is the chat key of the sub-agent's own session, made from the
	// parent's session, its message and the task (delegationKey).
	Key    string   `json:"key"`
	Task   string   `json:"task"`
	Groups []string `json:"groups,omitempty"`
	// Steps bounds the sub-agent's model calls; Depth is how deep it
	// is: 1 for a sub-agent of a person's turn.
	Steps int `json:"steps,omitempty"`
	Depth int `json:"depth"`
}

// DelegateConfig bounds delegation (keys of the agent section).
type DelegateConfig struct {
	// MaxDepth is how deep sub-agents may go: 1 (the default) lets a
	// person's turn delegate and no sub-agent delegate further; 0 takes
	// the default, and a negative value turns delegation off.
	MaxDepth int `yaml:"max_delegation_depth"`
	// MaxParallel is how many sub-agents one turn runs at once; the
	// other delegate calls of the same answer wait. Default 3.
	MaxParallel int `yaml:"max_parallel_delegates"`
	// MaxSteps bounds a sub-agent's model calls, and the steps a call
	// may ask for; default 10.
	MaxSteps int `yaml:"delegate_steps"`
	// Timeout bounds one delegate call; default 5m.
	Timeout config.Duration `yaml:"delegate_timeout"`
}

// Check checks the delegation keys.
func (c DelegateConfig) Check(ch *config.Checker) {
	ch.AtLeast("max_parallel_delegates", c.MaxParallel, 0)
	ch.AtLeast("delegate_steps", c.MaxSteps, 0)
	ch.Duration("delegate_timeout", c.Timeout.Std(), 0)
}

func (c *DelegateConfig) setDefaults() {
	if c.MaxDepth == 0 {
		c.MaxDepth = 1
	}
	if c.MaxParallel <= 0 {
		c.MaxParallel = 3
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = 10
	}
	if c.Timeout <= 0 {
		c.Timeout = config.Duration(5 * time.Minute)
	}
}

// delegateInput is a delegate call's arguments.
type delegateInput struct {
	Task   string   `json:"task"`
	Groups []string `json:"groups,omitempty"`
	Steps  int      `json:"steps,omitempty"`
	// state is what the call learned as it ran, read by UntrustedFor.
	state *delegateState
}

type delegateState struct{ tainted bool }

// delegateResult is what a delegate call returns to the model.
type delegateResult struct {
	Status string `json:"status"`
	Answer string `json:"answer,omitempty"`
	// Session is the sub-agent's session, which the console shows
	// folded under the call.
	Session int64  `json:"session,omitempty"`
	Note    string `json:"note,omitempty"`
}

// DelegateTools is the core tool delegate over the engine engine returns
// (the registry is built before the engine), or none when delegation is
// off (agent.max_delegation_depth below 0).
func DelegateTools(cfg DelegateConfig, engine func() *Engine) []tools.Tool {
	if cfg.MaxDepth < 0 {
		return nil
	}
	return []tools.Tool{DelegateTool(cfg, engine)}
}

// DelegateTool returns the core tool delegate over the engine engine
// returns.
func DelegateTool(cfg DelegateConfig, engine func() *Engine) tools.Tool {
	cfg.setDefaults()
	t := tools.New(tools.Definition{
		Name:        DelegateName,
		Description: "A sub-agent does a task with the groups named and returns its answer. It sees nothing of this chat: say all it needs.",
		// What it does is what the sub-agent's calls do, each through
		// the gate as the person's own would be.
		ReadOnly: true,
		Effect:   tools.EffectRead,
		// The sub-agent acts as the person (their memory, their Google
		// account): its answer is theirs, shown on their turns only.
		Personal: true,
		// The answer is outside text when the sub-agent read any.
		UntrustedFor: func(_ context.Context, in any) bool {
			d, ok := in.(delegateInput)
			return !ok || d.state == nil || d.state.tainted
		},
		Summarize: func(_ context.Context, in any) string {
			d, _ := in.(delegateInput)
			return "Have a sub-agent do: " + short(d.Task, 120)
		},
		Examples: []string{"research these three companies in parallel", "look into this and report back"},
		Timeout:  cfg.Timeout.Std(),
	}, func(ctx context.Context, in delegateInput) (any, error) {
		return engine().delegate(ctx, cfg, in)
	})
	decode := t.Decode
	t.Decode = func(args json.RawMessage) (any, error) {
		v, err := decode(args)
		if d, ok := v.(delegateInput); ok {
			d.state = &delegateState{}
			v = d
		}
		return v, err
	}
	return t
}

// short cuts s to n runes, with an ellipsis.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// delegating is what a turn gives its delegate calls: where they come
// from and the places they share.
type delegating struct {
	chat    string
	session int64
	message string
	depth   int
	places  chan struct{}
	tainted bool
	mu      sync.Mutex
	// asked are the sub-agents' questions, asked with the turn's answer.
	asked []Asked
}

type delegatingKey struct{}

// delegate runs one delegate call: the sub-agent's turn, to its answer
// or its question.
func (e *Engine) delegate(ctx context.Context, cfg DelegateConfig, in delegateInput) (any, error) {
	from, _ := ctx.Value(delegatingKey{}).(*delegating)
	caller := tools.CallerFrom(ctx)
	if from == nil || caller.UserKey == "" {
		return nil, &tools.Error{Code: tools.CodePermission, Message: "A sub-agent can only be started from a conversation."}
	}
	if from.depth >= cfg.MaxDepth {
		return nil, &tools.Error{Code: tools.CodePermission,
			Message:    fmt.Sprintf("A sub-agent cannot delegate further (agent.max_delegation_depth is %d).", max(cfg.MaxDepth, 0)),
			Suggestion: "Do the task yourself with the tools you have."}
	}
	task := strings.TrimSpace(in.Task)
	if task == "" {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: "task is empty.", Suggestion: "Give the sub-agent a complete instruction."}
	}
	for _, g := range in.Groups {
		if _, ok := e.reg.Group(g); !ok {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("There is no tool group %q.", g),
				Suggestion: "Name groups from the listing: " + e.reg.GroupNames()}
		}
	}
	steps := cfg.MaxSteps
	if in.Steps > 0 {
		steps = min(in.Steps, cfg.MaxSteps)
	}
	d := &Delegation{Chat: from.chat, Task: task, Groups: slices.Clone(in.Groups), Steps: steps, Depth: from.depth + 1}
	d.Key = delegationKey(from, d)
	select {
	case from.places <- struct{}{}:
		defer func() { <-from.places }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	stop := e.running.add(from.chat, task)
	defer stop()
	r, err := e.Handle(ctx, Inbound{ChatKey: d.Key, UserKey: caller.UserKey, Text: task, ID: "delegate:" + d.Key,
		Resume: true, Tainted: from.tainted, Groups: d.Groups, Delegation: d})
	if err != nil {
		return nil, err
	}
	if in.state != nil {
		in.state.tainted = r.Tainted
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The sub-agent's answer is the sentence of a turn cut short,
		// which speaks of a shutdown: the model is told what happened.
		return nil, &tools.Error{Code: tools.CodeTimeout,
			Message:    fmt.Sprintf("The sub-agent did not finish within %s (agent.delegate_timeout); what it did is kept.", cfg.Timeout.Std()),
			Suggestion: "Give it a narrower task, or do the rest yourself."}
	}
	sess, _ := e.store.OpenSession(context.WithoutCancel(ctx), d.Key)
	if len(r.Asks) > 0 {
		from.mu.Lock()
		for _, a := range relayed(d, r) {
			from.asked = append(from.asked, a)
		}
		from.mu.Unlock()
		return delegateResult{Status: "waiting_for_approval", Session: sess.ID,
			Note: "The sub-agent asked the person to approve a step; it carries on when they answer in this chat, and its answer is sent there. Tell the person so."}, nil
	}
	return delegateResult{Status: "done", Answer: r.Text, Session: sess.ID}, nil
}

// relayed are a sub-agent's questions as the person's chat shows them,
// each naming its task.
func relayed(d *Delegation, r Reply) []Asked {
	out := slices.Clone(r.Asks)
	for i := range out {
		text := out[i].Text
		if text == "" {
			text = r.Text
		}
		out[i].Text = fmt.Sprintf("The sub-agent working on “%s” asks:\n\n%s", short(d.Task, 80), text)
	}
	return out
}

// delegationKey is the chat key of a sub-agent's session: the same for
// the same task of the same message of the same session, so a turn run
// again after a restart finds the sub-agent it had started and carries
// it on instead of starting it anew.
func delegationKey(from *delegating, d *Delegation) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%s", from.session, from.message, d.Task, strings.Join(d.Groups, ","))
	return fmt.Sprintf("%s#sub%d:%s", from.chat, d.Depth, hex.EncodeToString(h.Sum(nil))[:16])
}

// runningDelegates are the sub-agents running now, by the person's chat.
type runningDelegates struct {
	mu    sync.Mutex
	tasks map[string][]*string
}

func (r *runningDelegates) add(chatKey, task string) (stop func()) {
	p := &task
	r.mu.Lock()
	if r.tasks == nil {
		r.tasks = map[string][]*string{}
	}
	r.tasks[chatKey] = append(r.tasks[chatKey], p)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tasks[chatKey] = slices.DeleteFunc(r.tasks[chatKey], func(q *string) bool { return q == p })
		if len(r.tasks[chatKey]) == 0 {
			delete(r.tasks, chatKey)
		}
	}
}

func (r *runningDelegates) of(chatKey string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.tasks[chatKey] {
		out = append(out, *p)
	}
	return out
}

// carryOnDelegate goes on with a sub-agent's turn once its approvals
// are decided: its answer is the person's reply, and is kept in the
// chat's own session so the conversation knows it.
func (e *Engine) carryOnDelegate(ctx context.Context, in Inbound, a Approval, note Inbound) (Reply, error) {
	var d Delegation
	if err := json.Unmarshal([]byte(a.Delegate), &d); err != nil {
		return Reply{}, fmt.Errorf("read the sub-agent of approval %s: %w", a.ID, err)
	}
	note.ChatKey, note.Delegation, note.Groups = d.Key, &d, d.Groups
	stop := e.running.add(d.Chat, d.Task)
	r, err := e.Handle(ctx, note)
	stop()
	if err != nil || len(r.Asks) > 0 {
		if err == nil {
			r.Asks = relayed(&d, r)
			r.Text = ""
		}
		return r, err
	}
	text := fmt.Sprintf("The sub-agent working on “%s” finished:\n\n%s", short(d.Task, 80), r.Text)
	sess, err := e.store.OpenSession(ctx, in.ChatKey)
	if err != nil {
		return Reply{}, err
	}
	m := Message{Role: RoleAssistant, Text: text}
	m.Tokens = e.countMessage(m)
	if err := e.store.Append(context.WithoutCancel(ctx), sess.ID, []Message{m}, Usage{}); err != nil {
		return Reply{}, fmt.Errorf("keep the sub-agent's answer in session %d: %w", sess.ID, err)
	}
	e.cache.drop(sess.ID)
	return Reply{Text: text, Usage: r.Usage, Tainted: r.Tainted}, nil
}

// delegation is the turn's Delegation as its approvals keep it, "" for
// the chat's own turn.
func (t *turn) delegation() string {
	if t.in.Delegation == nil {
		return ""
	}
	b, _ := json.Marshal(t.in.Delegation)
	return string(b)
}
