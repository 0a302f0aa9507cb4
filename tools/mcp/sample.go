package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/tools"
)

// SampleRequest is a server's sampling request as loadout runs it: on
// the model of the chat whose turn made the call, for its person.
type SampleRequest struct {
	ChatKey, UserKey string
	System           string
	Messages         []SampleMessage
	// MaxTokens is the server's bound on the answer.
	MaxTokens int
}

// SampleMessage is one message of a sampling request: role "user" or
// "assistant", and its text.
type SampleMessage struct {
	Role, Text string
}

// Sampler runs a sampling request on the configured model (the provider
// path of a turn, fail-over included), counting its tokens for the chat
// and person. It returns the answer's text and the model that wrote it.
type Sampler func(ctx context.Context, r SampleRequest) (text, model string, err error)

// sample answers a server's sampling/createMessage: the first time a
// server asks on a person's behalf, the person is asked whether it may
// use the model (it spends their tokens and reads what the model says);
// once they allow it, its later requests run without asking, until
// loadout restarts. Requests with tools or with anything but text are
// refused, as is one made where nobody can be asked and none was
// allowed before.
func (c *Client) sample(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
	if c.deps.Sample == nil {
		return nil, errors.New("sampling is not set up in this loadout")
	}
	call, err := c.callOf(ctx)
	if err != nil {
		return nil, err
	}
	p := req.Params
	r := SampleRequest{System: p.SystemPrompt, MaxTokens: int(p.MaxTokens)}
	caller := tools.CallerFrom(call.ctx)
	r.ChatKey, r.UserKey = caller.ChatKey, caller.UserKey
	for _, m := range p.Messages {
		t, ok := m.Content.(*sdk.TextContent)
		if !ok {
			return nil, fmt.Errorf("loadout samples text only, not %T", m.Content)
		}
		r.Messages = append(r.Messages, SampleMessage{Role: string(m.Role), Text: t.Text})
	}
	if len(r.Messages) == 0 {
		return nil, errors.New("a sampling request needs at least one message")
	}
	if err := c.allowSampling(ctx, call, r); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(call.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	text, model, err := c.deps.Sample(sctx, r)
	if err != nil {
		c.log.Warn("MCP server's sampling request failed", "err", err)
		return nil, fmt.Errorf("the model did not answer: %s", firstLine(err.Error(), 300))
	}
	return &sdk.CreateMessageResult{Content: &sdk.TextContent{Text: text}, Model: cmp.Or(model, "loadout"), Role: "assistant", StopReason: "endTurn"}, nil
}

// allowSampling asks the person, the first time, whether the server may
// use the model for them.
func (c *Client) allowSampling(ctx context.Context, call *callState, r SampleRequest) error {
	c.mu.Lock()
	ok := c.sampling[r.UserKey]
	c.mu.Unlock()
	if ok {
		return nil
	}
	asker, found := tools.AskerFrom(call.ctx)
	if !found || r.UserKey == "" {
		return errors.New("the person has not allowed this server to use the model, and nobody can be asked now")
	}
	if err := call.admit(); err != nil {
		return err
	}
	last := r.Messages[len(r.Messages)-1].Text
	text := fmt.Sprintf("The %s service asks to use the model on your behalf: it would spend your tokens and read what the model writes. Its request:\n“%s”\n\nAllow %s to use the model (now and later)?",
		c.srv.Name, tools.Shorten(strings.TrimSpace(last), 300), c.srv.Name)
	qctx, cancel := context.WithTimeout(call.ctx, c.deps.elicitationTTL())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	ans, err := asker.Ask(qctx, tools.Question{Text: text, Choices: []string{"Allow", "Deny"}})
	switch {
	case err != nil:
		return fmt.Errorf("the person was asked whether this server may use the model and did not allow it (%v)", err)
	case !isChoice(ans, "Allow", "yes", "y"):
		call.declined()
		return errors.New("the person did not allow this server to use the model")
	}
	c.mu.Lock()
	c.sampling[r.UserKey] = true
	c.mu.Unlock()
	c.log.Info("a person allowed an MCP server to use the model", "user", r.UserKey)
	return nil
}
