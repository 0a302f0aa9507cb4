package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/tools"
)

// SamplingRuleTool is the tool name of a person's rule that lets a
// server use the model for them: Scope{Tool: SamplingRuleTool, Action:
// <server name>}. No tool may take the name (the registry refuses it), so
// such a rule never allows a call of a tool.
const SamplingRuleTool = tools.SamplingRuleTool

// DefaultSamplingPerCall is mcp.servers[].sampling_per_call's default:
// how many sampling requests one call of a tool may make. The SDK
// fulfils a result's requests all at once, so without a bound one call
// could ask for any number.
const DefaultSamplingPerCall = 10

// SampleRequest is a server's sampling request as loadout runs it: on
// the model of the chat whose turn made the call, for its person.
type SampleRequest struct {
	ChatKey, UserKey string
	System           string
	Messages         []SampleMessage
	// MaxTokens is the server's bound on the answer.
	MaxTokens int
	// Tools are the server's tools the model may call (sampling with
	// tools, only where mcp.servers[].sampling_tools is true). The
	// server runs them, never loadout.
	Tools []tools.Definition
	// Hints are the server's model preferences' names, first first.
	Hints []string
}

// SampleMessage is one message of a sampling request: role "user" or
// "assistant" and its text; with tools, an assistant's Calls of the
// server's tools, or role "tool": the result (Text) the server got for
// the call CallID.
type SampleMessage struct {
	Role, Text string
	Calls      []SampleCall
	CallID     string
}

// SampleCall is the model's call of one of the server's tools; Arguments
// is a JSON object.
type SampleCall struct {
	ID, Name, Arguments string
}

// SampleAnswer is the model's answer: its text, its calls of the
// server's tools, and the model that wrote it.
type SampleAnswer struct {
	Text  string
	Calls []SampleCall
	Model string
}

// Sampler runs a sampling request on the configured model (the provider
// path of a turn, fail-over included), counting its tokens for the chat
// and person.
type Sampler func(ctx context.Context, r SampleRequest) (SampleAnswer, error)

// Rules keeps the people's own rules (the store): an allowance for a
// server to use the model is one, so it survives a restart, is listed by
// /rules and removed by /rules remove.
type Rules interface {
	Rules(ctx context.Context, userKey string) ([]tools.Rule, error)
	AddRule(ctx context.Context, r tools.Rule) error
}

// samplingToolName is what a provider accepts as a function's name.
var samplingToolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// sample answers a server's sampling/createMessage: a call may make at
// most sampling_per_call of them (refused beyond, before the person or
// the model is asked); the first time a server asks on a person's behalf, the person is asked whether it may
// use the model (it spends their tokens and reads what the model says);
// once they allow it, a rule of theirs lets its later requests run
// without asking. A request with tools is refused unless the server's
// sampling_tools is true; then the model's calls of the server's tools go
// back to the server, which runs them. Requests with anything but text
// and tool use are refused, as is one made where nobody can be asked and
// none was allowed before.
func (c *Client) sample(ctx context.Context, req *sdk.CreateMessageWithToolsRequest) (*sdk.CreateMessageWithToolsResult, error) {
	if c.deps.Sample == nil {
		return nil, errors.New("sampling is not set up in this loadout")
	}
	p := req.Params
	r, err := c.sampleRequest(p)
	if err != nil {
		return nil, err
	}
	call, err := c.callOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := call.admitSample(cmp.Or(c.srv.SamplingPerCall, DefaultSamplingPerCall)); err != nil {
		c.log.Warn("MCP server's sampling request refused", "why", err)
		return nil, err
	}
	caller := tools.CallerFrom(call.ctx)
	r.ChatKey, r.UserKey = caller.ChatKey, caller.UserKey
	if err := c.allowSampling(ctx, call, r); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(call.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	ans, err := c.deps.Sample(sctx, r)
	if err != nil {
		c.log.Warn("MCP server's sampling request failed", "err", err)
		return nil, fmt.Errorf("the model did not answer: %s", firstLine(err.Error(), 300))
	}
	return c.sampleResult(ans)
}

// sampleResult is the model's answer as the server reads it: its text,
// then its calls of the server's tools as tool use (stop reason toolUse).
func (c *Client) sampleResult(ans SampleAnswer) (*sdk.CreateMessageWithToolsResult, error) {
	res := &sdk.CreateMessageWithToolsResult{Model: cmp.Or(ans.Model, "loadout"), Role: "assistant", StopReason: "endTurn"}
	if ans.Text != "" || len(ans.Calls) == 0 {
		res.Content = append(res.Content, &sdk.TextContent{Text: ans.Text})
	}
	for _, k := range ans.Calls {
		in := map[string]any{}
		if strings.TrimSpace(k.Arguments) != "" {
			if err := json.Unmarshal([]byte(k.Arguments), &in); err != nil {
				return nil, fmt.Errorf("the model called %s with arguments that are not a JSON object", k.Name)
			}
		}
		res.Content = append(res.Content, &sdk.ToolUseContent{ID: k.ID, Name: k.Name, Input: in})
		res.StopReason = "toolUse"
	}
	return res, nil
}

// sampleRequest reads a server's request: text messages, and where the
// server may sample with tools, its tools, tool use and tool results.
func (c *Client) sampleRequest(p *sdk.CreateMessageWithToolsParams) (SampleRequest, error) {
	r := SampleRequest{System: p.SystemPrompt, MaxTokens: int(p.MaxTokens)}
	if p.ModelPreferences != nil {
		for _, h := range p.ModelPreferences.Hints {
			if h != nil && h.Name != "" {
				r.Hints = append(r.Hints, h.Name)
			}
		}
	}
	refuse := func() error {
		return fmt.Errorf("loadout does not sample with tools for the %s server: its config does not say sampling_tools: true (mcp.servers[].sampling_tools)", c.srv.Name)
	}
	if len(p.Tools) > 0 {
		if !c.srv.SamplingTools {
			return r, refuse()
		}
		if p.ToolChoice == nil || p.ToolChoice.Mode != "none" {
			for _, t := range p.Tools {
				if t == nil || !samplingToolName().MatchString(t.Name) {
					return r, errors.New("a sampling tool's name must be 1–64 of A-Z, a-z, 0-9, _ and -")
				}
				params, err := json.Marshal(t.InputSchema)
				if err != nil || t.InputSchema == nil || string(params) == "null" {
					params = json.RawMessage(`{"type":"object","properties":{}}`)
				}
				r.Tools = append(r.Tools, tools.Definition{Name: t.Name, Description: cmp.Or(t.Description, t.Title), Parameters: params})
			}
		}
	}
	for _, m := range p.Messages {
		if m == nil {
			continue
		}
		msg := SampleMessage{Role: string(m.Role)}
		var results []SampleMessage
		for _, part := range m.Content {
			switch v := part.(type) {
			case *sdk.TextContent:
				msg.Text += v.Text
			case *sdk.ToolUseContent:
				if !c.srv.SamplingTools {
					return r, refuse()
				}
				in := v.Input
				if in == nil {
					in = map[string]any{}
				}
				args, err := json.Marshal(in)
				if err != nil {
					return r, fmt.Errorf("a tool use's input: %w", err)
				}
				msg.Calls = append(msg.Calls, SampleCall{ID: v.ID, Name: v.Name, Arguments: string(args)})
			case *sdk.ToolResultContent:
				if !c.srv.SamplingTools {
					return r, refuse()
				}
				results = append(results, SampleMessage{Role: "tool", CallID: v.ToolUseID, Text: toolResultText(v)})
			default:
				return r, fmt.Errorf("loadout samples text and tool use only, not %T", part)
			}
		}
		// A tool's results answer the calls before them; the message's
		// text follows.
		r.Messages = append(r.Messages, results...)
		if msg.Text != "" || len(msg.Calls) > 0 || len(results) == 0 {
			r.Messages = append(r.Messages, msg)
		}
	}
	if len(r.Messages) == 0 {
		return r, errors.New("a sampling request needs at least one message")
	}
	return r, nil
}

// toolResultText is what the model reads of a tool's result: its text,
// else its structured content; "error: " first when it failed.
func toolResultText(v *sdk.ToolResultContent) string {
	var parts []string
	for _, c := range v.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if text == "" && v.StructuredContent != nil {
		if b, err := json.Marshal(v.StructuredContent); err == nil {
			text = string(b)
		}
	}
	if v.IsError {
		text = "error: " + text
	}
	return text
}

// allowSampling asks the person, the first time, whether the server may
// use the model for them; their yes is kept as their rule (allow
// mcp_sampling (<server>)), asked again once they remove it.
func (c *Client) allowSampling(ctx context.Context, call *callState, r SampleRequest) error {
	if r.UserKey != "" && c.deps.Rules != nil {
		own, err := c.deps.Rules.Rules(ctx, r.UserKey)
		if err != nil {
			c.log.Error("cannot read a person's rules; the person is asked", "err", err)
		}
		for _, rule := range own {
			if rule.Owner == r.UserKey && rule.Decision == tools.RuleAllow && rule.Tool == SamplingRuleTool && rule.Action == c.srv.Name {
				return nil
			}
		}
	}
	asker, found := tools.AskerFrom(call.ctx)
	if !found || r.UserKey == "" {
		return errors.New("the person has not allowed this server to use the model, and nobody can be asked now")
	}
	if err := call.admit(); err != nil {
		return err
	}
	var last string
	for i := len(r.Messages) - 1; i >= 0 && last == ""; i-- {
		last = strings.TrimSpace(r.Messages[i].Text)
	}
	text := fmt.Sprintf("The %s service asks to use the model on your behalf: it would spend your tokens and read what the model writes. Its request:\n“%s”\n\nAllow %s to use the model (now and later)?",
		c.srv.Name, tools.Shorten(last, 300), c.srv.Name)
	if len(r.Tools) > 0 {
		text += fmt.Sprintf(" The model may ask %s to run its own tools; I run none of them.", c.srv.Name)
	}
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
	if c.deps.Rules != nil {
		rule := tools.Rule{Code: tools.NewRuleCode(), Owner: r.UserKey, Decision: tools.RuleAllow,
			Scope: tools.Scope{Tool: SamplingRuleTool, Action: c.srv.Name}}
		if err := c.deps.Rules.AddRule(context.WithoutCancel(ctx), rule); err != nil {
			c.log.Error("cannot keep a person's allowance to use the model as a rule; they will be asked again", "err", err)
		}
	}
	c.log.Info("a person allowed an MCP server to use the model", "user", r.UserKey)
	return nil
}
