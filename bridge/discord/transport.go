package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
)

// transport carries discordgo's requests. It sends those for Discord's
// API to the configured api_url (discordgo names its endpoints by
// package-level values, which the channel leaves alone), answers the
// gateway lookup with gateway_url when one is set, and waits out rate
// limits: a 429 is tried again after its retry_after, and a global one
// holds every request of the bot until then.
type transport struct {
	a    *Adapter
	base *http.Client
}

// maxLimited is how often one request is tried while Discord answers 429.
const maxLimited = 5

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cfg := t.a.cfg
	if rest, ok := strings.CutPrefix(req.URL.String(), discordgo.EndpointAPI); ok {
		path, _, _ := strings.Cut(rest, "?")
		if cfg.GatewayURL != "" && (path == "gateway" || path == "gateway/bot") {
			return gatewayAnswer(req, cfg.GatewayURL), nil
		}
		u, err := req.URL.Parse(cfg.APIURL + rest)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.URL, req.Host = u, ""
	}
	for attempt := 1; ; attempt++ {
		if err := t.a.rl.wait(req.Context()); err != nil {
			return nil, err
		}
		resp, err := t.base.Do(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || attempt >= maxLimited || req.GetBody == nil && req.Body != nil {
			return resp, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		after, global := limitOf(resp.Header, body)
		t.a.rl.limited(redactPath(req.URL.Path), after, global)
		if err := t.a.rl.sleep(req.Context(), after); err != nil {
			return nil, err
		}
		if req.GetBody != nil {
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = b
		}
	}
}

// gatewayAnswer answers GET /gateway(/bot) with the configured URL.
func gatewayAnswer(req *http.Request, url string) *http.Response {
	b, _ := json.Marshal(map[string]any{"url": url, "shards": 1})
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: req}
}

// limitOf reads a 429: how long to wait (retry_after, in seconds, else
// the Retry-After header) and whether the limit is the bot's global one.
func limitOf(h http.Header, body []byte) (time.Duration, bool) {
	var v struct {
		RetryAfter float64 `json:"retry_after"`
		Global     bool    `json:"global"`
	}
	_ = json.Unmarshal(body, &v)
	after := time.Duration(v.RetryAfter * float64(time.Second))
	if after <= 0 {
		if s, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil {
			after = time.Duration(s * float64(time.Second))
		}
	}
	if after <= 0 {
		after = time.Second
	}
	return min(after, 10*time.Minute), v.Global || h.Get("X-RateLimit-Global") != ""
}

// limits holds the bot's global rate limit: the time before which no
// request goes.
type limits struct {
	sleep func(ctx context.Context, d time.Duration) error
	log   *slog.Logger

	mu    sync.Mutex
	until time.Time
}

// limited records a 429 on path.
func (l *limits) limited(path string, after time.Duration, global bool) {
	l.log.Warn("discord: rate limited; waiting", "path", path, "retry_after", after, "global", global)
	if !global {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := time.Now().Add(after); u.After(l.until) {
		l.until = u
	}
}

// wait waits until the global limit, if any, has passed.
func (l *limits) wait(ctx context.Context) error {
	l.mu.Lock()
	d := time.Until(l.until)
	l.mu.Unlock()
	if d <= 0 {
		return ctx.Err()
	}
	return l.sleep(ctx, d)
}

// tokenInPath is an interaction's token in a request's path: a
// credential for 15 minutes, kept out of logs and errors.
var tokenInPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`((?:webhooks|interactions)/\d+/)[^/?\s"]+`) })

// redactPath is a request's path or URL without interaction tokens.
func redactPath(p string) string { return tokenInPath().ReplaceAllString(p, "${1}[token]") }

// scrub is err without the interaction tokens discordgo's errors carry
// in their URLs: a failed request's, or a rate limit's.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("discord: %s %s: %w", ue.Op, redactPath(ue.URL), ue.Err)
	}
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) {
		return fmt.Errorf("discord: rate limited on %s; retry after %s", redactPath(rl.URL), rl.RetryAfter)
	}
	return err
}
