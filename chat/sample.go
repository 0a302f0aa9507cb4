package chat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"loadout/tools"
)

// Sampling is a request an MCP server makes of the model (sampling):
// its system prompt and messages, and the most the answer may take.
type Sampling struct {
	System string
	// Messages are user and assistant messages; with Tools, an assistant
	// message may carry ToolCalls and a RoleTool message answers one
	// (ToolCallID), as the server ran it.
	Messages []Message
	// MaxTokens is the server's bound on the answer (0: none of its
	// own); Sample lowers it to what is left under the person's caps.
	MaxTokens int
	// Tools are the server's own tools the model may call (sampling with
	// tools): the model's calls come back in Sampled.ToolCalls for the
	// server to run; loadout runs none of them.
	Tools []tools.Definition
	// Hints are the server's model preferences (names, first wins). A
	// hint picks a model only when it names one this deployment offers:
	// the chat's model, llm.model, or one of Models; else the chat's
	// model answers.
	Hints []string
	// Models are the other models the deployment offers (llm.fallbacks').
	Models []string
}

// Sampled is the model's answer to a Sampling: its text, the calls of
// the server's tools it made, and the model that wrote it.
type Sampled struct {
	Text      string
	ToolCalls []ToolCall
	Model     string
}

// ErrSamplingTooLarge refuses a sampling request larger than the
// model's history budget.
var ErrSamplingTooLarge = errors.New("the request is larger than the model's context allows here")

// ErrSamplingCapped refuses a sampling request of a person past a spend
// cap (limits.*), or one whose answer what is left would have no room
// for.
var ErrSamplingCapped = errors.New("the request does not fit the person's allowance")

// Sample runs s on the chat's model, through the same provider path as a
// turn (its fail-over included), and adds what it cost to the chat's
// open session, so it counts in the chat's and the person's tokens. It
// returns the model's text and the model that answered. A request larger
// than the history budget (llm.history_tokens) is refused with
// ErrSamplingTooLarge. It is held to userKey's spend caps: before it
// reaches the model, its prompt (estimated) and the most its answer may
// take are reserved against them in the ledger, atomically, so requests
// made at once cannot each pass a cap on the same room; the answer's
// bound (s.MaxTokens) is lowered to what is left. Past a cap, or with
// too little left for an answer, it is refused with ErrSamplingCapped
// and never reaches the model. Afterwards the hold is replaced with what
// it cost, charged to the person and the chat. Whether the person
// allowed the server to sample is the caller's to have asked.
func (e *Engine) Sample(ctx context.Context, chatKey, userKey string, s Sampling) (text, model string, err error) {
	r, err := e.SampleWithTools(ctx, chatKey, userKey, s)
	return r.Text, r.Model, err
}

// SampleWithTools is Sample answering with the model's calls of
// s.Tools too.
func (e *Engine) SampleWithTools(ctx context.Context, chatKey, userKey string, s Sampling) (Sampled, error) {
	settings, err := e.settings(ctx, chatKey)
	if err != nil {
		return Sampled{}, err
	}
	own := firstNonEmpty(settings.Model, e.cfg.Model)
	req := Request{Model: pickModel(s.Hints, append([]string{own, e.cfg.Model}, s.Models...)), MaxTokens: s.MaxTokens, Tools: s.Tools}
	if req.Model == "" {
		req.Model = own
	}
	req.Messages = append(req.Messages, Message{Role: RoleSystem, Text: s.System})
	n := e.cfg.Count(s.System)
	for _, d := range s.Tools {
		n += e.cfg.Count(d.Name + " " + d.Description + " " + string(d.Parameters))
	}
	for _, m := range s.Messages {
		switch {
		case m.Role == RoleUser, m.Role == RoleAssistant:
		case m.Role == RoleTool && len(s.Tools) > 0 && m.ToolCallID != "":
		default:
			return Sampled{}, fmt.Errorf("a sampling message's role must be user or assistant, not %q", m.Role)
		}
		if len(m.ToolCalls) > 0 && (m.Role != RoleAssistant || len(s.Tools) == 0) {
			return Sampled{}, errors.New("only an assistant message of a sampling request with tools may carry tool calls")
		}
		msg := Message{Role: m.Role, Text: m.Text, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, ToolName: m.ToolName}
		req.Messages = append(req.Messages, msg)
		n += e.cfg.Count(m.Text)
		for _, c := range m.ToolCalls {
			n += e.cfg.Count(c.Name + " " + c.Arguments)
		}
	}
	if n > e.cfg.HistoryTokens {
		return Sampled{}, fmt.Errorf("%w (%d tokens, at most %d)", ErrSamplingTooLarge, n, e.cfg.HistoryTokens)
	}
	// Held before it is spent: the prompt's estimate (in the model's
	// tokens) and the most the answer may take, within the caps.
	prompt := int(math.Ceil(float64(n) * e.ratio(ctx, req.Model)))
	r, err := e.reserve(ctx, userKey, chatKey, req.Model, prompt, s.MaxTokens)
	if err != nil {
		return Sampled{}, err
	}
	req.MaxTokens = r.maxTokens
	resp, err := e.model.Complete(ctx, req)
	if err != nil {
		if serr := e.settle(ctx, r, Spend{}); serr != nil {
			e.cfg.Logger.Error("a sampling request's hold could not be released; it stays counted", "chat", chatKey, "err", serr)
		}
		return Sampled{}, fmt.Errorf("sampling: %w", err)
	}
	answered := cmp.Or(resp.Model, req.Model)
	if err := e.settle(ctx, r, e.spend(answered, e.spent(ctx, answered, n, resp))); err != nil {
		return Sampled{}, fmt.Errorf("charge a sampling request: %w", err)
	}
	sess, err := e.store.OpenSession(ctx, chatKey)
	if err != nil {
		return Sampled{}, fmt.Errorf("open session for %s: %w", chatKey, err)
	}
	if err := e.store.Append(context.WithoutCancel(ctx), sess.ID, nil, resp.Usage); err != nil {
		return Sampled{}, fmt.Errorf("count the tokens of a sampling request: %w", err)
	}
	e.cache.drop(sess.ID)
	var calls []ToolCall
	if len(s.Tools) > 0 {
		calls = resp.ToolCalls
	}
	return Sampled{Text: resp.Text, ToolCalls: calls, Model: answered}, nil
}

// pickModel is the first of offered that the first fitting hint names
// (a hint names a model it is part of, as the MCP spec reads hints:
// "sonnet" names "claude-sonnet-4"); "" when no hint fits. Only offered
// models are ever picked.
func pickModel(hints, offered []string) string {
	for _, h := range hints {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		for _, m := range offered {
			if m != "" && strings.Contains(strings.ToLower(m), h) {
				return m
			}
		}
	}
	return ""
}
