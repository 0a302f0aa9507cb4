package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"loadout/chat"
)

var _ chat.Model = (*Failover)(nil)

// FailoverConfig is the part of the llm section that names further model
// services (llm.fallbacks) and says when a failing one is skipped
// (llm.breaker). Zero values are the documented defaults; with no
// fallbacks the command uses the plain Client and none of this applies.
type FailoverConfig struct {
	// Fallbacks are asked in order when the ones before them fail.
	Fallbacks []Fallback `yaml:"fallbacks"`
	Breaker   Breaker    `yaml:"breaker"`
	// Now is the breaker's clock; default time.Now.
	Now func() time.Time `yaml:"-"`
	// Observer hears of every provider's calls (metrics); default none.
	Observer Observer `yaml:"-"`
}

// Fallback is one entry of llm.fallbacks: another OpenAI-compatible
// service. What it leaves out (timeout, max_tokens) is llm's; its
// attempts and backoff are llm's.
type Fallback struct {
	// BaseURL is the service's URL; it must be set.
	BaseURL string `yaml:"base_url" secret:"url"`
	APIKey  string `yaml:"api_key" secret:"true"`
	// Model is the model asked for there; default the request's (the
	// chat's own, else llm.model).
	Model string `yaml:"model"`
	// MaxTokens bounds its answers (max_tokens); default llm.max_tokens.
	MaxTokens int `yaml:"max_tokens"`
	// Timeout bounds one attempt; default llm.timeout.
	Timeout time.Duration `yaml:"timeout"`
	// EmbeddingModel is the embedding model asked for there when
	// embeddings are on and the services before it fail; empty, this
	// service is not asked for embeddings.
	EmbeddingModel string `yaml:"embedding_model"`
}

// Breaker says when a provider that keeps failing is skipped. After
// Failures calls in a row failed (or at once, for as long as a
// Retry-After says) it is skipped for Cooldown; then one call tries it
// (half-open): an answer restores it, a failure skips it again for twice
// as long, up to MaxCooldown.
type Breaker struct {
	// Failures defaults to 3.
	Failures int `yaml:"failures"`
	// Cooldown defaults to 30s, MaxCooldown to 10m.
	Cooldown    time.Duration `yaml:"cooldown"`
	MaxCooldown time.Duration `yaml:"max_cooldown"`
}

func (b *Breaker) setDefaults() {
	if b.Failures <= 0 {
		b.Failures = 3
	}
	if b.Cooldown <= 0 {
		b.Cooldown = 30 * time.Second
	}
	if b.MaxCooldown <= 0 {
		b.MaxCooldown = 10 * time.Minute
	}
	b.MaxCooldown = max(b.MaxCooldown, b.Cooldown)
}

// Observer hears of the calls a Failover makes (metrics.Metrics is one).
// Its methods must be quick and safe for concurrent use.
type Observer interface {
	// ProviderCall: a request for provider ended with outcome "ok",
	// "failed" (the provider's fault; reason says which), "rejected"
	// (the request's own fault, such as a 400) or "skipped" (its breaker
	// is open; nothing was sent).
	ProviderCall(provider, outcome, reason string)
	// FailedOver: a request that failed at from, for reason, goes to to.
	FailedOver(from, to, reason string)
}

type noObserver struct{}

func (noObserver) ProviderCall(string, string, string) {}
func (noObserver) FailedOver(string, string, string)   {}

// Reasons a provider failed, as logs and metrics name them.
const (
	ReasonRateLimited  = "rate_limited"  // 429 after its retries, or with a Retry-After too long to wait
	ReasonQuota        = "quota"         // 402, or a 429 that says the quota is spent
	ReasonKeyRejected  = "key_rejected"  // 401, 403
	ReasonUnknownModel = "unknown_model" // 404
	ReasonServerError  = "server_error"  // 5xx after its retries, or an answer that could not be read
	ReasonRefused      = "refused"       // another 4xx that is not the request's fault
	ReasonTimeout      = "timeout"       // an attempt ran out of time
	ReasonUnreachable  = "unreachable"   // no connection, or it broke
	ReasonCut          = "cut"           // the answer's stream ended before it was complete
)

// BreakerState is where a provider's breaker stands.
type BreakerState int

// Breaker states.
const (
	Closed   BreakerState = iota // asked
	HalfOpen                     // cooling-off over: the next call tries it
	Open                         // skipped until its cooling-off ends
)

func (s BreakerState) String() string {
	return [...]string{"closed", "half-open", "open"}[s]
}

// ProviderStatus is a provider as /status, /readyz and /metrics show it.
// It never holds a key or a full URL.
type ProviderStatus struct {
	// Name is its config key: "llm", "llm.fallbacks[0]", ….
	Name string
	// Host is its server's host (and port).
	Host string
	// Model is the model it is asked for; "" for the request's.
	Model string
	State BreakerState
	// Until is when an open breaker lets a call try it again.
	Until time.Time
	// Reason is why its last call failed, "" after an answer.
	Reason string
}

// Failover is a chat.Model over several OpenAI-compatible services: each
// request goes to the first whose breaker lets it, and to the next when
// that one fails in a way waiting would not mend (see Fault). A request
// that is itself at fault (400: invalid, or too long for the model) is
// not sent elsewhere. Every provider gets the same messages in the same
// order, so each one's prompt cache keeps its prefix. It is safe for
// concurrent use.
//
// Streaming: text a provider streamed before it failed is not the
// answer. The next provider starts again from "" (chat.Request.OnText),
// and the channels that show an answer as it is written replace it, as
// they do when one provider's attempt is retried.
type Failover struct {
	providers []*provider
	breaker   Breaker
	now       func() time.Time
	log       *slog.Logger
	obs       Observer
	// last is the provider that answered last, and its model.
	last atomic.Pointer[lastAnswer]
}

type lastAnswer struct {
	provider int
	model    string
}

// NewFailover returns the model of the llm section: primary's service
// first, then each fallback in order, each a Client that leaves to the
// next what retrying cannot mend (Config.FailFast). A fallback takes
// primary's settings for what it leaves out.
func NewFailover(primary Config, fc FailoverConfig) *Failover {
	ps := make([]Provider, 0, 1+len(fc.Fallbacks))
	c := primary
	c.FailFast = true
	ps = append(ps, Provider{Name: "llm", Host: Host(primary.BaseURL), Client: New(c)})
	for i, fb := range fc.Fallbacks {
		c := primary
		c.FailFast = true
		c.BaseURL, c.APIKey = fb.BaseURL, fb.APIKey
		if fb.Timeout > 0 {
			c.Timeout = fb.Timeout
		}
		if fb.MaxTokens > 0 {
			c.MaxTokens = fb.MaxTokens
		}
		ps = append(ps, Provider{Name: fmt.Sprintf("llm.fallbacks[%d]", i), Host: Host(fb.BaseURL), Model: fb.Model, Client: New(c)})
	}
	return NewFailoverOf(ps, fc, primary.Logger)
}

// Provider is one service of a Failover.
type Provider struct {
	// Name names it in logs, /status and /metrics; Host is all of its URL
	// that is ever shown.
	Name, Host string
	// Model replaces the request's model; "" keeps it.
	Model  string
	Client chat.Model
}

// NewFailoverOf returns a Failover over providers, in order; fc's
// Fallbacks are not read. A nil log is slog.Default(). Failures are
// sorted by Fault, which knows this package's Client: an error of
// another chat.Model that it does not recognise counts as its provider's
// (unreachable) and goes to the next.
func NewFailoverOf(providers []Provider, fc FailoverConfig, log *slog.Logger) *Failover {
	fc.Breaker.setDefaults()
	if fc.Now == nil {
		fc.Now = time.Now
	}
	if fc.Observer == nil {
		fc.Observer = noObserver{}
	}
	if log == nil {
		log = slog.Default()
	}
	f := &Failover{breaker: fc.Breaker, now: fc.Now, log: log, obs: fc.Observer}
	for _, p := range providers {
		f.providers = append(f.providers, &provider{Provider: p})
	}
	return f
}

// Host is the host (and port) of a base URL, the only part of it that is
// ever logged or shown: a URL may carry credentials.
func Host(base string) string {
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return u.Host
	}
	return "(unreadable base_url)"
}

// ErrSkipped: every provider is cooling off after failing; no request
// was sent.
var ErrSkipped = errors.New("every model provider is cooling off after failures")

// Complete sends req to the first provider that its breaker lets through,
// and to the next one when it fails for a reason Fault names. The error,
// when every provider failed, joins each one's, named by provider; a
// request the provider refused as faulty returns that provider's error
// as it is.
func (f *Failover) Complete(ctx context.Context, req chat.Request) (chat.Response, error) {
	var errs []error
	var from *provider
	var why string
	for i, p := range f.providers {
		probe, ok := p.admit(f.now())
		if !ok {
			f.obs.ProviderCall(p.Name, "skipped", "")
			continue
		}
		if from != nil {
			f.obs.FailedOver(from.Name, p.Name, why)
			f.log.Warn("model provider failed; the request goes to the next one",
				"from", from.Name, "from_host", from.Host, "reason", why, "to", p.Name, "to_host", p.Host)
		}
		r := req
		if p.Model != "" {
			r.Model = p.Model
		}
		resp, err := p.Client.Complete(ctx, r)
		if err == nil {
			f.obs.ProviderCall(p.Name, "ok", "")
			if p.succeeded() {
				f.log.Info("model provider answers again", "provider", p.Name, "host", p.Host)
			}
			// Stored only when it changes: no allocation per request.
			if model, l := cmp.Or(r.Model, DefaultModel), f.last.Load(); l == nil || *l != (lastAnswer{i, model}) {
				f.last.Store(&lastAnswer{provider: i, model: model})
			}
			if r.Model != req.Model {
				resp.Model = r.Model
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			// The turn was cut short: nobody's fault.
			p.release(probe)
			return chat.Response{}, err
		}
		reason, after := Fault(err)
		if reason == "" {
			// The provider answered; the request is at fault and would
			// be everywhere.
			f.obs.ProviderCall(p.Name, "rejected", "")
			if p.succeeded() {
				f.log.Info("model provider answers again", "provider", p.Name, "host", p.Host)
			}
			return chat.Response{}, err
		}
		f.obs.ProviderCall(p.Name, "failed", reason)
		if until, opened := p.failed(f.now(), reason, after, f.breaker); opened {
			f.log.Warn("model provider skipped until its cooling-off ends",
				"provider", p.Name, "host", p.Host, "reason", reason, "until", until.UTC().Format(time.RFC3339))
		}
		errs = append(errs, fmt.Errorf("%s (%s): %w", p.Name, p.Host, err))
		from, why = p, reason
	}
	if len(errs) == 0 {
		return chat.Response{}, fmt.Errorf("model: %w (%s)", ErrSkipped, f.cooling())
	}
	return chat.Response{}, errors.Join(errs...)
}

// cooling lists when each provider is tried again.
func (f *Failover) cooling() string {
	var parts []string
	for _, s := range f.Providers() {
		parts = append(parts, fmt.Sprintf("%s until %s after %s", s.Name, s.Until.UTC().Format(time.TimeOnly), s.Reason))
	}
	return strings.Join(parts, "; ")
}

// Providers returns each provider's state, in order.
func (f *Failover) Providers() []ProviderStatus {
	now := f.now()
	out := make([]ProviderStatus, len(f.providers))
	for i, p := range f.providers {
		out[i] = p.status(now)
	}
	return out
}

// Last returns the provider that answered last and the model it was
// asked for; false before any answer.
func (f *Failover) Last() (ProviderStatus, string, bool) {
	l := f.last.Load()
	if l == nil {
		return ProviderStatus{}, "", false
	}
	return f.providers[l.provider].status(f.now()), l.model, true
}

// Ready reports whether a request would be sent somewhere: at least one
// provider is not cooling off.
func (f *Failover) Ready() bool {
	now := f.now()
	for _, p := range f.providers {
		if p.status(now).State != Open {
			return true
		}
	}
	return false
}

// Fault says whether a failed call of a provider is worth another
// provider, and why: "" when the request itself is at fault (400 invalid
// request, 413 or 422 too large, a context too long for the model), else
// one of the Reason constants. after is the wait the provider's last
// answer asked for (Retry-After), zero if it named none.
func Fault(err error) (reason string, after time.Duration) {
	if ae, ok := errors.AsType[*attemptError](err); ok {
		after = ae.after
	}
	switch code := status(err); {
	case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnprocessableEntity:
		return "", 0
	case code == http.StatusTooManyRequests && quota(err), code == http.StatusPaymentRequired:
		return ReasonQuota, after
	case code == http.StatusTooManyRequests:
		return ReasonRateLimited, after
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return ReasonKeyRejected, after
	case code == http.StatusNotFound:
		return ReasonUnknownModel, after
	case code == http.StatusRequestTimeout:
		return ReasonTimeout, after
	case code >= 500:
		return ReasonServerError, after
	case code != 0:
		return ReasonRefused, after
	}
	switch {
	case errors.Is(err, errCut), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonCut, 0
	case timedOut(err):
		return ReasonTimeout, 0
	case unreachable(err):
		return ReasonUnreachable, 0
	case errors.Is(err, errGarbled), isSyntax(err):
		return ReasonServerError, 0
	}
	return ReasonUnreachable, 0
}

// isSyntax reports whether err is an answer that is not the JSON it
// should be.
func isSyntax(err error) bool {
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return true
	}
	_, ok := errors.AsType[*json.UnmarshalTypeError](err)
	return ok
}

// provider is a Provider with its breaker.
type provider struct {
	Provider

	mu       sync.Mutex
	state    BreakerState
	failures int           // in a row, while closed
	until    time.Time     // open: skipped until then
	cooldown time.Duration // the last cooling-off; zero: none yet
	probing  bool          // half-open: the one call is out
	reason   string
}

// admit reports whether a call may go to p at now, and whether it is the
// one call a half-open breaker lets through.
func (p *provider) admit(now time.Time) (probe, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case Closed:
		return false, true
	case Open:
		if now.Before(p.until) {
			return false, false
		}
		p.state, p.probing = HalfOpen, false
	}
	if p.probing {
		return false, false
	}
	p.probing = true
	return true, true
}

// release gives back a half-open try that ended without a verdict.
func (p *provider) release(probe bool) {
	if !probe {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == HalfOpen {
		p.probing = false
	}
}

// succeeded closes the breaker and reports whether it was not closed.
func (p *provider) succeeded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.state
	// A cooldown of zero is the breaker's first one again.
	p.state, p.failures, p.probing, p.reason, p.cooldown = Closed, 0, false, "", 0
	return was != Closed
}

// failed records a failure at now and reports whether it opened the
// breaker, and until when.
func (p *provider) failed(now time.Time, reason string, after time.Duration, b Breaker) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reason = reason
	if p.cooldown <= 0 {
		p.cooldown = b.Cooldown
	}
	var until time.Time
	switch p.state {
	case HalfOpen:
		// The try failed: skipped again, for longer.
		p.cooldown = min(2*p.cooldown, b.MaxCooldown)
		until = now.Add(max(p.cooldown, after))
	case Open:
		// A call sent before it opened: only a longer Retry-After counts.
		if u := now.Add(after); u.After(p.until) {
			p.until = u
		}
		return p.until, false
	default:
		p.failures++
		if after > 0 {
			until = now.Add(after)
		}
		if p.failures >= b.Failures {
			if u := now.Add(p.cooldown); u.After(until) {
				until = u
			}
		}
		if until.IsZero() {
			return time.Time{}, false
		}
	}
	p.state, p.until, p.probing, p.failures = Open, until, false, 0
	return until, true
}

func (p *provider) status(now time.Time) ProviderStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := ProviderStatus{Name: p.Name, Host: p.Host, Model: p.Model, State: p.state, Reason: p.reason}
	if p.state == Open {
		if now.Before(p.until) {
			s.Until = p.until
		} else {
			s.State = HalfOpen
		}
	}
	return s
}
