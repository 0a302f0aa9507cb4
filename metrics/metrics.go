// Package metrics is loadout's Prometheus series, in a registry of their
// own: turns, sends and platform retries (a bridge.Observer), model calls
// and tokens (a chat.Model wrapper), each model provider's requests,
// failures, fail-overs and breaker (an openai.Observer), tool calls and
// group loads (a tools middleware), voice (a voice.Meter) and the inbox
// backlog, read at each scrape.
package metrics

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"loadout/bridge"
	"loadout/chat"
	"loadout/chat/openai"
	"loadout/tools"
)

// Metrics are the Prometheus series served at /metrics. They live in the
// app's own registry, not a global one.
type Metrics struct {
	reg          *prometheus.Registry
	turns        *prometheus.CounterVec
	turnSeconds  *prometheus.HistogramVec
	modelSeconds *prometheus.HistogramVec
	modelTokens  *prometheus.CounterVec
	toolCalls    *prometheus.CounterVec
	groupLoads   *prometheus.CounterVec
	sends        *prometheus.CounterVec
	apiRetries   *prometheus.CounterVec
	voiceSeconds *prometheus.CounterVec
	voiceChars   *prometheus.CounterVec
	// The model providers, when llm.fallbacks names more than one.
	providerCalls    *prometheus.CounterVec
	providerFailures *prometheus.CounterVec
	failovers        *prometheus.CounterVec
	// Spend per person and per chat (chat.Config.Charged).
	personTokens *prometheus.CounterVec
	chatTokens   *prometheus.CounterVec
	personCost   *prometheus.CounterVec
	chatCost     *prometheus.CounterVec
	// Embeddings (the embeddings section): requests by model and
	// outcome, tokens and texts by model.
	embedRequests *prometheus.CounterVec
	embedTokens   *prometheus.CounterVec
	embedTexts    *prometheus.CounterVec
	// released counts the memory given back after bursts of work.
	released prometheus.Counter
}

// InboxStats is what the inbox gauges are read from at each scrape.
type InboxStats interface {
	InboxStats(ctx context.Context) ([]bridge.InboxStat, error)
}

// New returns the series, with the inbox backlog read from inbox.
func New(inbox InboxStats) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_turns_total", Help: "Messages handled, by channel and outcome (answered, retrying, failed, quarantined).",
		}, []string{"channel", "outcome"}),
		turnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loadout_turn_duration_seconds", Help: "Time from the start of a turn to its answer, by channel.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"channel"}),
		modelSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loadout_model_request_duration_seconds", Help: "Model calls (retries included), by outcome (ok, error).",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"outcome"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_model_tokens_total", Help: "Tokens the model service reported, by direction (prompt, completion).",
		}, []string{"direction"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_tool_calls_total", Help: "Tool calls, by tool and status (success, error).",
		}, []string{"tool", "status"}),
		groupLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_group_loads_total", Help: "Tool groups loaded into sessions, by group.",
		}, []string{"group"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_sends_total", Help: "Answer parts handed to a platform, by channel and outcome (ok, error).",
		}, []string{"channel", "outcome"}),
		apiRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_platform_retries_total", Help: "Platform API calls tried again after a rate limit or server error, by channel.",
		}, []string{"channel"}),
		// By chat: a deployment's chats are its allowed people and
		// groups, a bounded set, and voice is paid per chat.
		voiceSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_voice_transcribed_seconds_total", Help: "Seconds of voice notes transcribed, by chat.",
		}, []string{"chat"}),
		voiceChars: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_voice_spoken_characters_total", Help: "Characters of answers read aloud, by chat.",
		}, []string{"chat"}),
		providerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_model_provider_requests_total",
			Help: "Model requests by provider (llm, llm.fallbacks[N]) and outcome (ok, failed, rejected: the request's own fault, skipped: its breaker was open).",
		}, []string{"provider", "outcome"}),
		providerFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_model_provider_failures_total", Help: "Model requests a provider failed, by provider and reason (rate_limited, quota, key_rejected, unknown_model, server_error, refused, timeout, unreachable, cut).",
		}, []string{"provider", "reason"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_model_failovers_total", Help: "Model requests that failed at one provider and went to the next, by provider left, provider taken and reason.",
		}, []string{"from", "to", "reason"}),
		// By person and by chat, each on its own: the allowed people
		// and their chats are bounded sets, their pairs need not be.
		personTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_spend_person_tokens_total", Help: "Model tokens (prompt and completion) spent on a person's turns, by person (user key).",
		}, []string{"person"}),
		chatTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_spend_chat_tokens_total", Help: "Model tokens (prompt and completion) spent in a chat, by chat.",
		}, []string{"chat"}),
		personCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_spend_person_cost_total", Help: "What a person's turns cost at llm.prices, in its currency, by person.",
		}, []string{"person"}),
		chatCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_spend_chat_cost_total", Help: "What a chat's turns cost at llm.prices, in its currency, by chat.",
		}, []string{"chat"}),
		embedRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_embedding_requests_total", Help: "Requests to the embeddings service, by model and outcome (ok, failed).",
		}, []string{"model", "outcome"}),
		embedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_embedding_tokens_total", Help: "Tokens the embeddings service reported (estimated where it reported none), by model.",
		}, []string{"model"}),
		embedTexts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadout_embedding_texts_total", Help: "Texts embedded (memories, messages, tools, queries), by model.",
		}, []string{"model"}),
	}
	m.released = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "loadout_memory_released_total", Help: "Times the process gave its memory back to the system once a burst of work was over.",
	})
	m.reg.MustRegister(m.released, m.embedRequests, m.embedTokens, m.embedTexts, m.turns, m.turnSeconds, m.modelSeconds, m.modelTokens, m.toolCalls, m.groupLoads, m.sends, m.apiRetries,
		m.voiceSeconds, m.voiceChars, m.providerCalls, m.providerFailures, m.failovers,
		m.personTokens, m.chatTokens, m.personCost, m.chatCost,
		inboxCollector{inbox},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Embedded counts an answered embeddings request of model: its texts
// and tokens.
func (m *Metrics) Embedded(model string, texts, tokens int) {
	m.embedRequests.WithLabelValues(model, "ok").Inc()
	m.embedTexts.WithLabelValues(model).Add(float64(texts))
	m.embedTokens.WithLabelValues(model).Add(float64(tokens))
}

// EmbedFailed counts a failed embeddings request of model.
func (m *Metrics) EmbedFailed(model string) { m.embedRequests.WithLabelValues(model, "failed").Inc() }

// Released counts memory given back after a burst of work.
func (m *Metrics) Released() { m.released.Inc() }

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Transcribed and Spoken make Metrics a voice.Meter.
func (m *Metrics) Transcribed(chatKey string, seconds int) {
	m.voiceSeconds.WithLabelValues(chatKey).Add(float64(seconds))
}

func (m *Metrics) Spoken(chatKey string, chars int) {
	m.voiceChars.WithLabelValues(chatKey).Add(float64(chars))
}

// Turn, Sent and Retried make Metrics a bridge.Observer.
func (m *Metrics) Turn(channel, outcome string, took time.Duration) {
	m.turns.WithLabelValues(channel, outcome).Inc()
	if outcome == bridge.OutcomeAnswered && took > 0 {
		m.turnSeconds.WithLabelValues(channel).Observe(took.Seconds())
	}
}

func (m *Metrics) Sent(channel string, ok bool) {
	outcome := "ok"
	if !ok {
		outcome = "error"
	}
	m.sends.WithLabelValues(channel, outcome).Inc()
}

func (m *Metrics) Retried(channel string) { m.apiRetries.WithLabelValues(channel).Inc() }

// Model wraps a chat.Model to time its calls and count its tokens.
func (m *Metrics) Model(next chat.Model) chat.Model { return meteredModel{next, m} }

type meteredModel struct {
	next chat.Model
	m    *Metrics
}

func (mm meteredModel) Complete(ctx context.Context, req chat.Request) (chat.Response, error) {
	start := time.Now()
	resp, err := mm.next.Complete(ctx, req)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	mm.m.modelSeconds.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	mm.m.modelTokens.WithLabelValues("prompt").Add(float64(resp.Usage.PromptTokens))
	mm.m.modelTokens.WithLabelValues("completion").Add(float64(resp.Usage.CompletionTokens))
	return resp, err
}

// Charged counts a charge the ledger holds in the spend series
// (chat.Config.Charged). They count what this process charged since it
// started: with replicas, each serves its own, and their sum is the
// whole.
func (m *Metrics) Charged(c chat.Charge) {
	tokens := float64(c.Spend.Tokens())
	m.personTokens.WithLabelValues(c.UserKey).Add(tokens)
	m.chatTokens.WithLabelValues(c.ChatKey).Add(tokens)
	if c.Spend.Cost > 0 {
		m.personCost.WithLabelValues(c.UserKey).Add(c.Spend.Cost)
		m.chatCost.WithLabelValues(c.ChatKey).Add(c.Spend.Cost)
	}
}

var _ openai.Observer = (*Metrics)(nil)

// ProviderCall and FailedOver make Metrics an openai.Observer.
func (m *Metrics) ProviderCall(provider, outcome, reason string) {
	m.providerCalls.WithLabelValues(provider, outcome).Inc()
	if reason != "" {
		m.providerFailures.WithLabelValues(provider, reason).Inc()
	}
}

func (m *Metrics) FailedOver(from, to, reason string) {
	m.failovers.WithLabelValues(from, to, reason).Inc()
}

// Providers adds the breaker state of each model provider, read from
// states at each scrape: 0 closed (asked), 1 half-open (the next request
// tries it), 2 open (skipped until its cooling-off ends).
func (m *Metrics) Providers(states func() []openai.ProviderStatus) {
	m.reg.MustRegister(providerCollector{states})
}

var providerStateDesc = prometheus.NewDesc("loadout_model_provider_breaker_state",
	"Breaker state of each model provider: 0 closed, 1 half-open, 2 open (skipped).", []string{"provider"}, nil)

type providerCollector struct {
	states func() []openai.ProviderStatus
}

func (c providerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- providerStateDesc }

func (c providerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.states() {
		ch <- prometheus.MustNewConstMetric(providerStateDesc, prometheus.GaugeValue, float64(s.State), s.Name)
	}
}

// Tools counts tool calls, and the groups successful calls loaded
// (load_tool_group, find_tools with load), read from the result's
// Groups. Tool and group names come from the registry (an unknown tool
// is counted as "unknown"), so the series stay bounded.
func (m *Metrics) Tools(reg *tools.Registry) tools.Middleware {
	return func(next tools.Handler) tools.Handler {
		return func(ctx context.Context, c tools.Call) tools.Result {
			r := next(ctx, c)
			name := c.Name
			if _, ok := reg.Tool(name); !ok {
				name = "unknown"
			}
			m.toolCalls.WithLabelValues(name, r.Status).Inc()
			if r.Status == tools.StatusSuccess {
				for _, g := range r.Groups {
					if _, ok := reg.Group(g.Name); ok && !g.Unload {
						m.groupLoads.WithLabelValues(g.Name).Inc()
					}
				}
			}
			return r
		}
	}
}

// inboxCollector reads the inbox backlog at each scrape.
type inboxCollector struct{ inbox InboxStats }

var (
	inboxOpenDesc = prometheus.NewDesc("loadout_inbox_open",
		"Events stored but not finished (pending or answered but unsent), by channel.", []string{"channel"}, nil)
	inboxAgeDesc = prometheus.NewDesc("loadout_inbox_oldest_age_seconds",
		"Age of the oldest unfinished event, by channel.", []string{"channel"}, nil)
)

func (c inboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inboxOpenDesc
	ch <- inboxAgeDesc
}

func (c inboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stats, err := c.inbox.InboxStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(inboxOpenDesc, err)
		return
	}
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(inboxOpenDesc, prometheus.GaugeValue, float64(s.Open), s.Channel)
		ch <- prometheus.MustNewConstMetric(inboxAgeDesc, prometheus.GaugeValue, time.Since(s.Oldest).Seconds(), s.Channel)
	}
}

// errorSeries are the counters whose samples are errors, by the label
// and values that say so, and how a person names them.
var errorSeries = []struct {
	metric, label string
	values        []string
	one, many     string
}{
	{"loadout_turns_total", "outcome", []string{"failed"}, "message failed", "messages failed"},
	{"loadout_turns_total", "outcome", []string{"quarantined"}, "message quarantined", "messages quarantined"},
	{"loadout_sends_total", "outcome", []string{"error"}, "answer part the platform refused", "answer parts the platform refused"},
	{"loadout_model_request_duration_seconds", "outcome", []string{"error"}, "model call failed", "model calls failed"},
	{"loadout_tool_calls_total", "status", []string{"error"}, "tool call failed", "tool calls failed"},
	{"loadout_model_failovers_total", "", nil, "model request failed over to another provider", "model requests failed over to another provider"},
}

// Errors counts, since the process started, the errors the counters
// hold: failed and quarantined messages, refused sends, failed model and
// tool calls, fail-overs, each as "N what", the largest first. What is
// zero is left out.
func (m *Metrics) Errors() ([]string, error) {
	families, err := m.reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	type count struct {
		n    uint64
		what string
	}
	var out []count
	for _, s := range errorSeries {
		var n uint64
		for _, f := range families {
			if f.GetName() != s.metric {
				continue
			}
			for _, mt := range f.GetMetric() {
				if s.label != "" && !slices.ContainsFunc(mt.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == s.label && slices.Contains(s.values, l.GetValue())
				}) {
					continue
				}
				switch {
				case mt.GetCounter() != nil:
					n += uint64(mt.GetCounter().GetValue())
				case mt.GetHistogram() != nil:
					n += mt.GetHistogram().GetSampleCount()
				}
			}
		}
		switch {
		case n == 1:
			out = append(out, count{n, s.one})
		case n > 1:
			out = append(out, count{n, s.many})
		}
	}
	slices.SortStableFunc(out, func(a, b count) int { return cmp.Compare(b.n, a.n) })
	lines := make([]string, len(out))
	for i, c := range out {
		lines[i] = fmt.Sprintf("%d %s", c.n, c.what)
	}
	return lines, nil
}
