package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/chat/openai"
)

// clock is the breaker's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// observed records what a Failover tells its Observer.
type observed struct {
	mu        sync.Mutex
	calls     []string // provider outcome reason
	failovers []string // from>to reason
}

func (o *observed) ProviderCall(provider, outcome, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, strings.TrimSpace(provider+" "+outcome+" "+reason))
}

func (o *observed) FailedOver(from, to, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failovers = append(o.failovers, from+">"+to+" "+reason)
}

func (o *observed) take() (calls, failovers []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	calls, failovers = o.calls, o.failovers
	o.calls, o.failovers = nil, nil
	return calls, failovers
}

const (
	primaryKey  = "sk-primary-SecretKeyValue-0001"
	fallbackKey = "sk-fallback-SecretKeyValue-0002"
)

// rig is a Failover over a primary and one fallback, with the breaker's
// clock, the waits between attempts, what the observer heard and the log.
type rig struct {
	f     *openai.Failover
	clock *clock
	waits *waits
	obs   *observed
	log   *chattest.LogBuffer
}

// newRig: the primary at primaryURL, tried 3 times for a server error,
// waiting at most 5s for a Retry-After; the breaker opens after 2 failed
// requests for a minute.
func newRig(t *testing.T, primaryURL, fallbackURL string, primaryTimeout time.Duration) *rig {
	t.Helper()
	r := &rig{clock: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}, waits: &waits{}, obs: &observed{}, log: &chattest.LogBuffer{}}
	r.f = openai.NewFailover(openai.Config{
		BaseURL: primaryURL, APIKey: primaryKey, Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Second,
		Timeout: primaryTimeout, Sleep: r.waits.sleep, Logger: slog.New(slog.NewTextHandler(r.log, nil)),
	}, openai.FailoverConfig{
		Fallbacks: []openai.Fallback{{BaseURL: fallbackURL, APIKey: fallbackKey, Model: "fallback-model", Timeout: 10 * time.Second}},
		Breaker:   openai.Breaker{Failures: 2, Cooldown: time.Minute},
		Now:       r.clock.now, Observer: r.obs,
	})
	return r
}

var turnHistory = []chat.Message{
	{Role: chat.RoleSystem, Text: "You are terse."},
	{Role: chat.RoleUser, Text: "What time is it?"},
	{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_current_time", Arguments: `{}`}}},
	{Role: chat.RoleTool, ToolCallID: "call_1", Text: `{"time":"12:00"}`},
}

func ask(f *openai.Failover, onText func(string)) (chat.Response, error) {
	return f.Complete(context.Background(), chat.Request{Model: "primary-model", Messages: turnHistory, OnText: onText})
}

// messages is the messages array of a request body, byte for byte.
func messages(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return string(req.Messages)
}

// Each fault of the primary that waiting would not mend sends the
// request to the fallback, with the same messages byte for byte (tool
// calls and results included) and the fallback's own model; the answer
// is the fallback's alone.
func TestFailsOverWhenThePrimaryCannotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		step     chattest.Step
		tries    int // requests the primary gets
		reason   string
		streamed bool
		// skip is how long the primary is skipped once its breaker
		// opens: at once for a long Retry-After, else after the second
		// failed request, for the cooling-off.
		skip   time.Duration
		atOnce bool
	}{
		{"429 with a long Retry-After", chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}},
			Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}, 1, openai.ReasonRateLimited, false, time.Hour, true},
		{"spent quota", chattest.Step{Status: http.StatusTooManyRequests,
			Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`}, 1, openai.ReasonQuota, false, time.Minute, false},
		{"500 after its retries", chattest.Step{Status: http.StatusInternalServerError, Body: `{"error":{"message":"boom"}}`}, 3, openai.ReasonServerError, false, time.Minute, false},
		{"401", chattest.Step{Status: http.StatusUnauthorized, Body: `{"error":{"message":"Incorrect API key"}}`}, 1, openai.ReasonKeyRejected, false, time.Minute, false},
		{"403", chattest.Step{Status: http.StatusForbidden, Body: `{"error":{"message":"key revoked"}}`}, 1, openai.ReasonKeyRejected, false, time.Minute, false},
		{"a hang", chattest.Step{Delay: time.Minute, Text: "never"}, 1, openai.ReasonTimeout, false, time.Minute, false},
		{"a stream cut after text", chattest.Step{Text: "The transfer is", Cut: true}, 1, openai.ReasonCut, true, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
			for range tc.tries {
				primary.Push(tc.step)
			}
			fallback.Fallback = "The answer from the fallback."
			r := newRig(t, primary.URL, fallback.URL, 300*time.Millisecond)
			var seen []string
			var onText func(string)
			if tc.streamed {
				onText = func(s string) { seen = append(seen, s) }
			}
			resp, err := ask(r.f, onText)
			if err != nil || resp.Text != "The answer from the fallback." || resp.Model != "fallback-model" {
				t.Fatalf("Complete = %+v, %v; want the fallback's answer", resp, err)
			}
			if n := len(primary.Requests()); n != tc.tries {
				t.Errorf("the primary got %d requests, want %d", n, tc.tries)
			}
			if got := fallback.Last(t).Model; got != "fallback-model" {
				t.Errorf("the fallback was asked for %q", got)
			}
			if p, f := messages(t, primary.Bodies()[0]), messages(t, fallback.Bodies()[0]); p != f {
				t.Errorf("the fallback got other messages than the primary:\n%s\n%s", p, f)
			}
			if tc.streamed {
				// The cut text was shown, then the fallback's answer
				// from the start: what stays is the answer alone.
				if len(seen) == 0 || seen[len(seen)-1] != resp.Text || !slices.Contains(seen, "The transfer is") {
					t.Errorf("OnText saw %q", seen)
				}
				if strings.Contains(resp.Text, "transfer") {
					t.Errorf("the cut text is in the answer: %q", resp.Text)
				}
			}
			calls, failovers := r.obs.take()
			if want := []string{"llm failed " + tc.reason, "llm.fallbacks[0] ok"}; !slices.Equal(calls, want) {
				t.Errorf("observer heard %q, want %q", calls, want)
			}
			if want := []string{"llm>llm.fallbacks[0] " + tc.reason}; !slices.Equal(failovers, want) {
				t.Errorf("fail-overs %q, want %q", failovers, want)
			}
			log := r.log.String()
			if n := strings.Count(log, "goes to the next one"); n != 1 {
				t.Errorf("the fail-over is logged %d times:\n%s", n, log)
			}
			if !strings.Contains(log, "reason="+tc.reason) || !strings.Contains(log, "from_host="+strings.TrimPrefix(strings.TrimSuffix(primary.URL, "/v1"), "http://")) {
				t.Errorf("the log does not name the reason and host:\n%s", log)
			}
			if strings.Contains(log, primaryKey) || strings.Contains(log, fallbackKey) || strings.Contains(log, primary.URL) {
				t.Errorf("the log shows a key or a full URL:\n%s", log)
			}
			if p, model, ok := r.f.Last(); !ok || p.Name != "llm.fallbacks[0]" || model != "fallback-model" {
				t.Errorf("Last = %+v %q %v", p, model, ok)
			}

			// Until its breaker opens the primary is asked first; then
			// it is skipped until the cooling-off ends, and one request
			// finds it answering again.
			if !tc.atOnce {
				if s := r.f.Providers()[0]; s.State != openai.Closed {
					t.Fatalf("one failure opened the breaker: %+v", s)
				}
				for range tc.tries {
					primary.Push(tc.step)
				}
				if resp, err := ask(r.f, onText); err != nil || resp.Text != "The answer from the fallback." {
					t.Fatalf("second request: %+v, %v", resp, err)
				}
			}
			if s := r.f.Providers()[0]; s.State != openai.Open || !s.Until.Equal(r.clock.now().Add(tc.skip)) || s.Reason != tc.reason {
				t.Fatalf("primary = %+v; want skipped for %s", s, tc.skip)
			}
			asked := len(primary.Requests())
			primary.Fallback = "The primary again."
			r.clock.advance(tc.skip - time.Second)
			if resp, err := ask(r.f, onText); err != nil || resp.Text != "The answer from the fallback." || len(primary.Requests()) != asked {
				t.Fatalf("while skipped: %+v, %v; the primary asked %d times, want %d", resp, err, len(primary.Requests()), asked)
			}
			r.clock.advance(time.Second)
			if resp, err := ask(r.f, onText); err != nil || resp.Text != "The primary again." {
				t.Fatalf("after the cooling-off: %+v, %v", resp, err)
			}
			if s := r.f.Providers()[0]; s.State != openai.Closed {
				t.Errorf("after an answer: %+v", s)
			}
		})
	}
}

// A primary where nothing listens: no retries, no waits, the fallback
// answers.
func TestFailsOverWhenThePrimaryIsUnreachable(t *testing.T) {
	fallback := chattest.NewModelServer(t)
	fallback.Text("from the fallback")
	r := newRig(t, chattest.UnreachableURL(t), fallback.URL, 5*time.Second)
	resp, err := ask(r.f, nil)
	if err != nil || resp.Text != "from the fallback" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	if len(r.waits.d) != 0 {
		t.Errorf("waited %v before failing over", r.waits.d)
	}
	if calls, _ := r.obs.take(); calls[0] != "llm failed "+openai.ReasonUnreachable {
		t.Errorf("observer heard %q", calls)
	}
}

// A request the provider refuses as faulty (400: invalid, or the context
// too long) is reported as it is; no other provider gets it and the
// breaker does not count it.
func TestARequestsOwnFaultIsNotFailedOver(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"Invalid 'messages[3]'","type":"invalid_request_error"}}`,
		`{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`,
	} {
		primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
		r := newRig(t, primary.URL, fallback.URL, 5*time.Second)
		for range 3 {
			primary.Push(chattest.Step{Status: http.StatusBadRequest, Body: body})
			if _, err := ask(r.f, nil); err == nil || !strings.Contains(err.Error(), "400") {
				t.Fatalf("err = %v, want the 400", err)
			}
		}
		if len(fallback.Requests()) != 0 || len(primary.Requests()) != 3 {
			t.Fatalf("fallback got %d requests, primary %d", len(fallback.Requests()), len(primary.Requests()))
		}
		if s := r.f.Providers()[0]; s.State != openai.Closed {
			t.Errorf("400s opened the breaker: %+v", s)
		}
		if calls, failovers := r.obs.take(); len(failovers) != 0 || calls[0] != "llm rejected" {
			t.Errorf("observer heard %q, %q", calls, failovers)
		}
	}
}

// A Retry-After is honoured: the primary is skipped until it ends, then
// one request tries it (half-open) and its answer restores it.
func TestRetryAfterSkipsThePrimaryUntilItEnds(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Push(chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"600"}}, Body: `{"error":{"message":"slow down"}}`})
	primary.Fallback, fallback.Fallback = "primary", "fallback"
	r := newRig(t, primary.URL, fallback.URL, 5*time.Second)
	answers := func(n int) []string {
		var out []string
		for range n {
			resp, err := ask(r.f, nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resp.Text)
		}
		return out
	}
	if got := answers(3); !slices.Equal(got, []string{"fallback", "fallback", "fallback"}) {
		t.Fatalf("answers = %q", got)
	}
	if n := len(primary.Requests()); n != 1 {
		t.Fatalf("the primary got %d requests while it asked to wait", n)
	}
	s := r.f.Providers()[0]
	if s.State != openai.Open || !s.Until.Equal(r.clock.now().Add(600*time.Second)) || s.Reason != openai.ReasonRateLimited {
		t.Fatalf("primary = %+v", s)
	}
	if calls, _ := r.obs.take(); !slices.Contains(calls, "llm skipped") {
		t.Errorf("skips not observed: %q", calls)
	}
	if n := strings.Count(r.log.String(), "skipped until its cooling-off ends"); n != 1 {
		t.Errorf("the breaker's opening is logged %d times:\n%s", n, r.log.String())
	}
	r.clock.advance(599 * time.Second)
	if got := answers(1); got[0] != "fallback" || len(primary.Requests()) != 1 {
		t.Fatalf("a second before the wait ends: %q, primary asked %d times", got, len(primary.Requests()))
	}
	r.clock.advance(time.Second)
	if r.f.Providers()[0].State != openai.HalfOpen {
		t.Fatalf("after the wait: %+v", r.f.Providers()[0])
	}
	if got := answers(2); !slices.Equal(got, []string{"primary", "primary"}) {
		t.Fatalf("after the wait: %q", got)
	}
	if s := r.f.Providers()[0]; s.State != openai.Closed || s.Reason != "" {
		t.Fatalf("restored primary = %+v", s)
	}
	if p, model, _ := r.f.Last(); p.Name != "llm" || model != "primary-model" {
		t.Errorf("Last = %s %s", p.Name, model)
	}
	if !strings.Contains(r.log.String(), "answers again") {
		t.Errorf("the restore is not logged:\n%s", r.log.String())
	}
}

// After Failures failed requests in a row the primary is skipped for the
// cooling-off; one request then tries it, and a failure skips it for
// twice as long.
func TestBreakerOpensHalfOpensAndBacksOff(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Fallback, fallback.Fallback = "primary", "fallback"
	fail := func(n int) {
		for range n {
			primary.Fail(http.StatusServiceUnavailable)
		}
	}
	r := newRig(t, primary.URL, fallback.URL, 5*time.Second)
	ask1 := func() string {
		t.Helper()
		resp, err := ask(r.f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Text
	}
	fail(3)
	if ask1() != "fallback" || r.f.Providers()[0].State != openai.Closed {
		t.Fatalf("one failure opened the breaker: %+v", r.f.Providers()[0])
	}
	fail(3)
	if ask1() != "fallback" || r.f.Providers()[0].State != openai.Open {
		t.Fatalf("two failures in a row left it closed: %+v", r.f.Providers()[0])
	}
	asked := len(primary.Requests())
	if ask1() != "fallback" || len(primary.Requests()) != asked {
		t.Fatal("an open breaker let a request through")
	}
	// The cooling-off ends: one try, which fails: skipped for 2 minutes.
	r.clock.advance(time.Minute)
	fail(3)
	if ask1() != "fallback" || len(primary.Requests()) != asked+3 {
		t.Fatalf("the half-open try: primary asked %d times, want %d", len(primary.Requests()), asked+3)
	}
	if s := r.f.Providers()[0]; s.State != openai.Open || !s.Until.Equal(r.clock.now().Add(2*time.Minute)) {
		t.Fatalf("after a failed try: %+v", s)
	}
	r.clock.advance(time.Minute)
	if ask1() != "fallback" || len(primary.Requests()) != asked+3 {
		t.Fatal("the doubled cooling-off was not kept")
	}
	r.clock.advance(time.Minute)
	if ask1() != "primary" || r.f.Providers()[0].State != openai.Closed {
		t.Fatalf("after the doubled cooling-off: %+v", r.f.Providers()[0])
	}
	// Restored, it starts from the first cooling-off again.
	fail(6)
	ask1()
	ask1()
	if s := r.f.Providers()[0]; s.State != openai.Open || !s.Until.Equal(r.clock.now().Add(time.Minute)) {
		t.Fatalf("reopened: %+v", s)
	}
}

// While the half-open try is out, other requests skip the provider.
func TestHalfOpenLetsOneRequestThrough(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Push(chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"60"}}, Body: `{}`})
	primary.Fallback, fallback.Fallback = "primary", "fallback"
	r := newRig(t, primary.URL, fallback.URL, 5*time.Second)
	if resp, _ := ask(r.f, nil); resp.Text != "fallback" {
		t.Fatal(resp.Text)
	}
	r.clock.advance(time.Minute)
	// The try streams; while it is out, another request goes elsewhere.
	release := make(chan struct{})
	started := make(chan struct{})
	primary.Push(chattest.Step{Text: "slow primary", Chunks: []string{"slow ", "primary"}})
	done := make(chan string)
	go func() {
		var once sync.Once
		resp, err := ask(r.f, func(string) {
			once.Do(func() { close(started); <-release })
		})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- resp.Text
	}()
	<-started
	if resp, err := ask(r.f, nil); err != nil || resp.Text != "fallback" {
		t.Errorf("during the try: %+v, %v", resp, err)
	}
	close(release)
	if got := <-done; got != "slow primary" {
		t.Errorf("the try answered %q", got)
	}
	if r.f.Providers()[0].State != openai.Closed {
		t.Errorf("after a good try: %+v", r.f.Providers()[0])
	}
}

// When every provider is skipped nothing is sent and the error says so;
// /readyz reads that from Ready.
func TestEveryProviderSkipped(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	r := newRig(t, primary.URL, fallback.URL, 5*time.Second)
	long := chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}, Body: `{}`}
	primary.Push(long)
	fallback.Push(long)
	if !r.f.Ready() {
		t.Fatal("not ready before any failure")
	}
	_, err := ask(r.f, nil)
	if err == nil || !strings.Contains(err.Error(), "llm (") || !strings.Contains(err.Error(), "llm.fallbacks[0] (") {
		t.Fatalf("err = %v; want both providers' failures", err)
	}
	if r.f.Ready() {
		t.Fatal("ready with every provider skipped")
	}
	_, err = ask(r.f, nil)
	if !errors.Is(err, openai.ErrSkipped) || len(primary.Requests())+len(fallback.Requests()) != 2 {
		t.Fatalf("err = %v after %d requests", err, len(primary.Requests())+len(fallback.Requests()))
	}
	r.clock.advance(time.Hour)
	if !r.f.Ready() {
		t.Fatal("not ready after the waits ended")
	}
}

// A turn cut short (shutdown) is nobody's fault: no fail-over, no
// failure counted, and a half-open try is given back.
func TestACancelledRequestIsNotFailedOver(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Push(chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"60"}}, Body: `{}`})
	r := newRig(t, primary.URL, fallback.URL, 5*time.Second)
	ask(r.f, nil)
	r.clock.advance(time.Minute)
	primary.Push(chattest.Step{Delay: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		chattest.Eventually(t, "the try to reach the primary", func() bool { return len(primary.Requests()) >= 2 })
		cancel()
	}()
	asked := len(fallback.Requests())
	if _, err := r.f.Complete(ctx, chat.Request{Model: "m", Messages: turnHistory}); err == nil {
		t.Fatal("a cancelled request answered")
	}
	if len(fallback.Requests()) != asked {
		t.Error("a cancelled request went to the fallback")
	}
	if s := r.f.Providers()[0]; s.State != openai.HalfOpen {
		t.Errorf("the try was not given back: %+v", s)
	}
	primary.Text("back")
	if resp, err := ask(r.f, nil); err != nil || resp.Text != "back" {
		t.Errorf("next request: %+v, %v", resp, err)
	}
}

// Fault sorts errors: the request's own fault is "", the rest name a
// reason.
func TestFaultReasons(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{400, `{"error":{"message":"bad"}}`, ""},
		{413, `{"error":{"message":"too large"}}`, ""},
		{422, `{"error":{"message":"unprocessable"}}`, ""},
		{402, `{"error":{"message":"pay"}}`, openai.ReasonQuota},
		{404, `{"error":{"message":"no such model"}}`, openai.ReasonUnknownModel},
		{409, `{"error":{"message":"conflict"}}`, openai.ReasonRefused},
		{502, `<html>bad gateway</html>`, openai.ReasonServerError},
	} {
		m := chattest.NewModelServer(t)
		for range 4 {
			m.Push(chattest.Step{Status: tc.status, Body: tc.body})
		}
		var w waits
		_, err := client(m, &w).Complete(context.Background(), chat.Request{Model: "m"})
		if got, _ := openai.Fault(err); got != tc.want {
			t.Errorf("%d: Fault = %q, want %q (%v)", tc.status, got, tc.want, err)
		}
	}
}

// Without fallbacks the client is unchanged: a long Retry-After is still
// waited (capped), not given up on.
func TestWithoutFailFastLongWaitsAreStillWaited(t *testing.T) {
	m := chattest.NewModelServer(t)
	m.Push(chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}, Body: `{}`})
	m.Text("ok")
	var w waits
	resp, err := client(m, &w).Complete(context.Background(), chat.Request{Model: "m"})
	if err != nil || resp.Text != "ok" || len(m.Requests()) != 2 {
		t.Fatalf("%+v, %v after %d requests", resp, err, len(m.Requests()))
	}
}

// max_tokens goes with each provider's requests: a fallback's own, else
// llm's.
func TestMaxTokensPerProvider(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Fail(http.StatusUnauthorized)
	f := openai.NewFailover(openai.Config{BaseURL: primary.URL, MaxTokens: 500, Attempts: 1, Logger: slog.New(slog.DiscardHandler)},
		openai.FailoverConfig{Fallbacks: []openai.Fallback{{BaseURL: fallback.URL, MaxTokens: 200}}})
	if _, err := f.Complete(context.Background(), chat.Request{Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if p, fb := primary.Last(t).MaxTokens, fallback.Last(t).MaxTokens; p != 500 || fb != 200 {
		t.Errorf("max_tokens: primary %d, fallback %d", p, fb)
	}
	if !bytes.Contains(fallback.Bodies()[0], []byte(`"max_tokens":200`)) {
		t.Errorf("body: %s", fallback.Bodies()[0])
	}
}

// Host is all of a URL that is ever shown: no credentials, path or query.
func TestHostShowsNoCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:s3cret@llm.example.com:8443/v1?key=abc": "llm.example.com:8443",
		"http://127.0.0.1:11434/v1":                           "127.0.0.1:11434",
		"":                                                    "api.openai.com",
		"::not a url":                                         "(unreadable base_url)",
	} {
		if got := openai.Host(in); got != want {
			t.Errorf("Host(%q) = %q, want %q", in, got, want)
		}
	}
}

// answering is a chat.Model that answers at once, for measuring what the
// Failover itself costs.
type answering struct{}

func (answering) Complete(context.Context, chat.Request) (chat.Response, error) {
	return chat.Response{Text: "ok"}, nil
}

// A request the first provider answers costs the Failover no allocation.
func TestFailoverAddsNoAllocationPerRequest(t *testing.T) {
	f := openai.NewFailoverOf([]openai.Provider{{Name: "llm", Client: answering{}}, {Name: "llm.fallbacks[0]", Client: answering{}}},
		openai.FailoverConfig{}, slog.New(slog.DiscardHandler))
	req := chat.Request{Model: "m", Messages: turnHistory}
	ctx := context.Background()
	f.Complete(ctx, req)
	if n := testing.AllocsPerRun(100, func() { f.Complete(ctx, req) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}
