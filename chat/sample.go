package chat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
)

// Sampling is a request an MCP server makes of the model (sampling):
// its system prompt and messages, and the most the answer may take.
type Sampling struct {
	System    string
	Messages  []Message // user and assistant messages, text only
	MaxTokens int
}

// ErrSamplingTooLarge refuses a sampling request larger than the
// model's history budget.
var ErrSamplingTooLarge = errors.New("the request is larger than the model's context allows here")

// ErrSamplingCapped refuses a sampling request of a person past a spend
// cap (limits.*).
var ErrSamplingCapped = errors.New("the person has used up their allowance")

// Sample runs s on the chat's model, through the same provider path as a
// turn (its fail-over included), and adds what it cost to the chat's
// open session, so it counts in the chat's and the person's tokens. It
// returns the model's text and the model that answered. A request larger
// than the history budget (llm.history_tokens) is refused with
// ErrSamplingTooLarge. It is held to userKey's spend caps as a turn is:
// past one it is refused with ErrSamplingCapped and never reaches the
// model, and what it cost is charged to the person and the chat. Whether
// the person allowed the server to sample is the caller's to have asked.
func (e *Engine) Sample(ctx context.Context, chatKey, userKey string, s Sampling) (text, model string, err error) {
	settings, err := e.settings(ctx, chatKey)
	if err != nil {
		return "", "", err
	}
	req := Request{Model: firstNonEmpty(settings.Model, e.cfg.Model), MaxTokens: s.MaxTokens}
	req.Messages = append(req.Messages, Message{Role: RoleSystem, Text: s.System})
	n := e.cfg.Count(s.System)
	for _, m := range s.Messages {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return "", "", fmt.Errorf("a sampling message's role must be user or assistant, not %q", m.Role)
		}
		req.Messages = append(req.Messages, Message{Role: m.Role, Text: m.Text})
		n += e.cfg.Count(m.Text)
	}
	if n > e.cfg.HistoryTokens {
		return "", "", fmt.Errorf("%w (%d tokens, at most %d)", ErrSamplingTooLarge, n, e.cfg.HistoryTokens)
	}
	allowance, err := e.Allowance(ctx, userKey, chatKey)
	if err != nil {
		return "", "", err
	}
	if c, over := allowance.Reached(); over {
		return "", "", fmt.Errorf("%w: %s", ErrSamplingCapped, allowance.Refusal(c))
	}
	resp, err := e.model.Complete(ctx, req)
	if err != nil {
		return "", "", fmt.Errorf("sampling: %w", err)
	}
	if _, err := e.Charge(context.WithoutCancel(ctx), userKey, chatKey, cmp.Or(resp.Model, req.Model), resp.Usage); err != nil {
		return "", "", fmt.Errorf("charge a sampling request: %w", err)
	}
	sess, err := e.store.OpenSession(ctx, chatKey)
	if err != nil {
		return "", "", fmt.Errorf("open session for %s: %w", chatKey, err)
	}
	if err := e.store.Append(context.WithoutCancel(ctx), sess.ID, nil, resp.Usage); err != nil {
		return "", "", fmt.Errorf("count the tokens of a sampling request: %w", err)
	}
	e.cache.drop(sess.ID)
	return resp.Text, cmp.Or(resp.Model, req.Model), nil
}
