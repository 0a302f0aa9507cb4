// Package openai adapts go-openai to chat.Model, for any OpenAI-compatible
// chat completions server.
package openai

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/backoff"
	"loadout/chat"
)

var _ chat.Model = (*Client)(nil)

// Defaults: OpenAI's API, and the model asked for when a request names
// none.
const (
	DefaultBaseURL = "https://api.openai.com/v1"
	DefaultModel   = "gpt-4o-mini"
)

// Config configures a Client. Zero values are the documented defaults.
type Config struct {
	// BaseURL defaults to DefaultBaseURL.
	BaseURL string `yaml:"base_url" secret:"url"`
	APIKey  string `yaml:"api_key" secret:"true"`
	// Timeout bounds one attempt. Default 120s.
	Timeout time.Duration `yaml:"timeout"`
	// Attempts is how often a transient fault (429, 5xx, timeout, garbled
	// response) is tried in all. Default 4.
	Attempts int `yaml:"attempts"`
	// Backoff is the wait before the second attempt; it doubles after
	// each, up to MaxBackoff (default 30s). Default 1s. A Retry-After the
	// server sends is waited instead, capped at MaxBackoff.
	Backoff    time.Duration `yaml:"backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// MaxTokens bounds the answer, sent as max_tokens. Zero sends none:
	// the server's own limit.
	MaxTokens int `yaml:"max_tokens"`
	// FailFast is for a provider with another behind it (a Failover sets
	// it): a fault the next provider would not share ends the call at
	// once instead of being retried here — a Retry-After longer than
	// MaxBackoff, an attempt that timed out, a connection that could not
	// be made, a stream cut short, a spent quota. Server errors and short
	// rate limits are still retried up to Attempts.
	FailFast bool `yaml:"-"`
	// Sleep replaces the wait between attempts (tests record waits with it).
	Sleep      func(ctx context.Context, d time.Duration) error `yaml:"-"`
	HTTPClient *http.Client                                     `yaml:"-"`
	Logger     *slog.Logger                                     `yaml:"-"`
}

// Client is a chat.Model over go-openai. It is safe for concurrent use.
type Client struct {
	c     *goopenai.Client
	cfg   Config
	retry backoff.Policy
}

// New returns a Client.
func New(cfg Config) *Client {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 120 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 4
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	oc := goopenai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	hc := http.DefaultClient
	if cfg.HTTPClient != nil {
		hc = cfg.HTTPClient
	}
	// go-openai's errors carry no headers, so a transport notes each
	// answer's Retry-After for the attempt that asked.
	inner := hc.Transport
	if inner == nil {
		inner = http.DefaultTransport
	}
	wrapped := *hc
	wrapped.Transport = retryAfterTransport{inner}
	oc.HTTPClient = &wrapped
	return &Client{
		c:   goopenai.NewClientWithConfig(oc),
		cfg: cfg,
		retry: backoff.Policy{
			Attempts: cfg.Attempts, Initial: cfg.Backoff, Max: cfg.MaxBackoff, Sleep: cfg.Sleep,
		},
	}
}

// Complete sends one chat completion request, retrying transient faults
// with the shared backoff, honouring a Retry-After the server sends.
func (c *Client) Complete(ctx context.Context, req chat.Request) (chat.Response, error) {
	if req.Model == "" {
		req.Model = DefaultModel
	}
	oreq := request(req)
	oreq.MaxTokens = c.cfg.MaxTokens
	if req.MaxTokens > 0 && (oreq.MaxTokens == 0 || req.MaxTokens < oreq.MaxTokens) {
		// A request's own bound (a server's sampling maxTokens) within
		// the configured one.
		oreq.MaxTokens = req.MaxTokens
	}
	var resp chat.Response
	attempt := 0
	err := c.retry.Do(ctx, func(err error) (bool, time.Duration) {
		var after time.Duration
		if ae := (*attemptError)(nil); errors.As(err, &ae) {
			after = ae.after
		}
		ok := Transient(err)
		if ok && c.cfg.FailFast && c.elsewhere(ctx, err, after) {
			ok = false
		}
		if ok && attempt < c.cfg.Attempts && ctx.Err() == nil {
			c.cfg.Logger.Warn("model call failed; retrying", "attempt", attempt, "retry_after", after, "err", errors.Unwrap(err))
		}
		return ok, after
	}, func(ctx context.Context) error {
		attempt++
		var after time.Duration
		once := c.once
		if req.OnText != nil {
			once = func(ctx context.Context, oreq goopenai.ChatCompletionRequest) (chat.Response, error) {
				return c.stream(ctx, oreq, req.OnText)
			}
		}
		r, err := once(context.WithValue(ctx, retryAfterKey{}, &after), oreq)
		if err != nil {
			return &attemptError{err: err, after: after}
		}
		resp = r
		return nil
	})
	if err != nil {
		// The attempt's error stays in the chain: a Failover reads the
		// wait its answer asked for.
		if ctx.Err() != nil {
			return chat.Response{}, fmt.Errorf("model: %w (after %v)", ctx.Err(), err)
		}
		switch status(err) {
		case http.StatusUnauthorized, http.StatusForbidden:
			return chat.Response{}, fmt.Errorf("model: %w: %w", chat.ErrModelKey, err)
		case http.StatusNotFound:
			return chat.Response{}, fmt.Errorf("model: %w (%q): %w", chat.ErrModelUnknown, oreq.Model, err)
		}
		return chat.Response{}, fmt.Errorf("model: %w", err)
	}
	return resp, nil
}

// elsewhere reports whether a transient fault of an attempt is better
// taken to another provider than retried here (Config.FailFast).
func (c *Client) elsewhere(ctx context.Context, err error, after time.Duration) bool {
	switch {
	case after > c.cfg.MaxBackoff, errors.Is(err, errCut), errors.Is(err, io.ErrUnexpectedEOF), quota(err):
		return true
	case ctx.Err() == nil && timedOut(err):
		return true
	}
	return unreachable(err)
}

// timedOut reports whether err is an attempt that ran out of time.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// unreachable reports whether err is a connection that could not be
// made: the name did not resolve, or the dial failed.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	oe, ok := errors.AsType[*net.OpError](err)
	return ok && oe.Op == "dial"
}

// quota reports whether err is a 429 that says the account's quota is
// spent: waiting does not help.
func quota(err error) bool {
	ae, ok := errors.AsType[*goopenai.APIError](err)
	if !ok || ae.HTTPStatusCode != http.StatusTooManyRequests {
		return false
	}
	code, _ := ae.Code.(string)
	return code == "insufficient_quota" || ae.Type == "insufficient_quota"
}

// status is the HTTP status of a failed call; zero when there was no
// answer.
func status(err error) int {
	if ae, ok := errors.AsType[*goopenai.APIError](err); ok {
		return ae.HTTPStatusCode
	}
	if re, ok := errors.AsType[*goopenai.RequestError](err); ok {
		return re.HTTPStatusCode
	}
	return 0
}

// attemptError is one failed attempt with the wait its answer asked for.
type attemptError struct {
	err   error
	after time.Duration
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

type retryAfterKey struct{}

// retryAfterTransport stores an answer's Retry-After in the *time.Duration
// the request's context carries.
type retryAfterTransport struct{ inner http.RoundTripper }

func (t retryAfterTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(r)
	if resp != nil {
		if p, ok := r.Context().Value(retryAfterKey{}).(*time.Duration); ok {
			*p = backoff.RetryAfter(resp.Header)
		}
	}
	return resp, err
}

func (c *Client) once(ctx context.Context, req goopenai.ChatCompletionRequest) (chat.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := c.c.CreateChatCompletion(ctx, req)
	if err != nil {
		return chat.Response{}, err
	}
	if len(resp.Choices) == 0 {
		return chat.Response{}, errGarbled
	}
	m := resp.Choices[0].Message
	out := chat.Response{
		Text:  m.Content,
		Usage: usage(resp.Usage),
	}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out, nil
}

// usage is what the provider reported, cached prompt tokens included
// where it reports them.
func usage(u goopenai.Usage) chat.Usage {
	out := chat.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// stream is once with the answer streamed: onText gets the text so far
// after every chunk that adds to it. Tool calls arrive in pieces, by
// index, and are put together.
func (c *Client) stream(ctx context.Context, req goopenai.ChatCompletionRequest, onText func(string)) (chat.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req.Stream = true
	req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	s, err := c.c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return chat.Response{}, err
	}
	defer s.Close()
	var (
		text  strings.Builder
		calls []chat.ToolCall
		out   chat.Response
		any   bool
		// finished is set by the chunk that says why the answer ended;
		// a stream that stops before it was cut, whatever it carried.
		finished bool
	)
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return chat.Response{}, err
		}
		if chunk.Usage != nil {
			out.Usage = usage(*chunk.Usage)
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		any = true
		if chunk.Choices[0].FinishReason != "" {
			finished = true
		}
		d := chunk.Choices[0].Delta
		if d.Content != "" {
			text.WriteString(d.Content)
			onText(text.String())
		}
		for _, tc := range d.ToolCalls {
			i := len(calls)
			if tc.Index != nil {
				i = *tc.Index
			}
			if i < 0 || i > len(calls) {
				return chat.Response{}, errGarbled
			}
			if i == len(calls) {
				calls = append(calls, chat.ToolCall{})
			}
			if tc.ID != "" {
				calls[i].ID = tc.ID
			}
			calls[i].Name += tc.Function.Name
			calls[i].Arguments += tc.Function.Arguments
		}
	}
	if !any {
		return chat.Response{}, errGarbled
	}
	if !finished {
		return chat.Response{}, errCut
	}
	out.Text, out.ToolCalls = text.String(), calls
	return out, nil
}

var (
	errGarbled = errors.New("response has no choices")
	// errCut is a stream that ended before its finish reason: a dropped
	// connection, not an answer. It is retried like one.
	errCut = errors.New("the answer's stream ended before it was complete")
)

// Transient reports whether a failed call of an OpenAI-compatible server
// may succeed if repeated: rate limits, server errors, timeouts, broken
// connections and unreadable responses. Other 4xx answers (bad key,
// unknown model) are final. The model client and the voice service both
// classify with it.
func Transient(err error) bool {
	if code := status(err); code != 0 {
		return retryableStatus(code)
	}
	return true
}

func retryableStatus(code int) bool {
	return code == 0 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
}

// imageParts is text followed by images, as a message's parts.
func imageParts(text string, images []chat.Image) []goopenai.ChatMessagePart {
	parts := []goopenai.ChatMessagePart{{Type: goopenai.ChatMessagePartTypeText, Text: text}}
	for _, img := range images {
		parts = append(parts, goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeImageURL,
			ImageURL: &goopenai.ChatMessageImageURL{URL: "data:" + img.MIME + ";base64," + base64.StdEncoding.EncodeToString(img.Data), Detail: goopenai.ImageURLDetailAuto}})
	}
	return parts
}

func request(req chat.Request) goopenai.ChatCompletionRequest {
	out := goopenai.ChatCompletionRequest{Model: req.Model}
	// Pictures tool results returned: a tool message carries text only,
	// so they follow the round's results as a message of their own.
	var toolImages []chat.Image
	flush := func() {
		if len(toolImages) == 0 {
			return
		}
		out.Messages = append(out.Messages, goopenai.ChatCompletionMessage{Role: string(chat.RoleUser),
			MultiContent: imageParts("(The pictures the tool results above returned.)", toolImages)})
		toolImages = nil
	}
	for _, m := range req.Messages {
		if m.Role != chat.RoleTool {
			flush()
		}
		om := goopenai.ChatCompletionMessage{Role: string(m.Role), Content: m.Text, ToolCallID: m.ToolCallID}
		if m.Role == chat.RoleTool {
			toolImages = append(toolImages, m.Images...)
		} else if len(m.Images) > 0 {
			om.Content = ""
			om.MultiContent = []goopenai.ChatMessagePart{{Type: goopenai.ChatMessagePartTypeText, Text: m.Text}}
			for _, img := range m.Images {
				om.MultiContent = append(om.MultiContent, goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeImageURL,
					ImageURL: &goopenai.ChatMessageImageURL{URL: "data:" + img.MIME + ";base64," + base64.StdEncoding.EncodeToString(img.Data), Detail: goopenai.ImageURLDetailAuto}})
			}
		}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, goopenai.ToolCall{
				ID: tc.ID, Type: goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		if m.Role == chat.RoleTool && om.Content == "" {
			om.Content = "(empty result)"
		}
		out.Messages = append(out.Messages, om)
	}
	flush()
	for _, d := range req.Tools {
		params := d.Parameters
		if len(params) == 0 {
			params = []byte(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, goopenai.Tool{
			Type: goopenai.ToolTypeFunction,
			Function: &goopenai.FunctionDefinition{
				Name: d.Name, Description: d.Description, Parameters: params,
			},
		})
	}
	return out
}
