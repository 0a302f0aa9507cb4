package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"loadout/backoff"
	"loadout/bridge"
)

// Error codes of the open platform the channel acts on.
const (
	// codeRateLimited: too many requests (also HTTP 429).
	codeRateLimited = 99991400
	// The tenant access token is missing, invalid or expired: fetch
	// another and try again.
	codeTokenMissing = 99991661
	codeTokenInvalid = 99991663
	codeTokenExpired = 99991677
)

// APIError is a call the open platform refused: its HTTP status, and
// the code and message of its answer.
type APIError struct {
	Status int
	Code   int
	Msg    string
	// after is how long the platform asked to wait (a rate limit).
	after time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("feishu: the open platform answered %d, code %d: %s", e.Status, e.Code, e.Msg)
}

// tokenCode reports whether the error is the access token's: another
// token mends it.
func (e *APIError) tokenCode() bool {
	return e.Code == codeTokenMissing || e.Code == codeTokenInvalid || e.Code == codeTokenExpired
}

// api calls the open platform with the app's tenant access token, kept
// until shortly before it expires. Its methods are safe for concurrent
// use.
type api struct {
	base, appID, secret string
	client              *http.Client
	sleep               func(ctx context.Context, d time.Duration) error
	now                 func() time.Time
	log                 *slog.Logger
	observer            bridge.Observer

	mu      sync.Mutex
	token   string
	expires time.Time
}

// tokenMargin is how long before its stated expiry a token is replaced.
const tokenMargin = 5 * time.Minute

// tenantToken is the app's access token: the one kept, or a new one.
func (c *api) tenantToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && c.now().Before(c.expires) {
		return c.token, nil
	}
	body, _ := json.Marshal(map[string]string{"app_id": c.appID, "app_secret": c.secret})
	var out struct {
		Token  string `json:"tenant_access_token"`
		Expire int    `json:"expire"`
	}
	if err := c.send(ctx, http.MethodPost, "/open-apis/auth/v3/tenant_access_token/internal", "", bytes.NewReader(body), "application/json; charset=utf-8", &out); err != nil {
		return "", err
	}
	if out.Token == "" {
		return "", errors.New("feishu: the open platform gave no tenant access token")
	}
	life := max(time.Duration(out.Expire)*time.Second-tokenMargin, time.Minute)
	c.token, c.expires = out.Token, c.now().Add(life)
	return c.token, nil
}

// forget drops token when it is still the one kept: the platform
// refused it.
func (c *api) forget(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.token = ""
	}
}

// send makes one request and decodes the answer's data (or, for the
// token, the answer itself) into out; a refusal is an *APIError.
func (c *api) send(ctx context.Context, method, path, token string, body io.Reader, ctype string, out any) error {
	resp, err := c.request(ctx, method, path, token, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Code int             `json:"code"`
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("feishu: reading the answer to %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return &APIError{Status: resp.StatusCode, Code: -1, Msg: "an answer that is not JSON", after: waitOf(resp.Header)}
	}
	if resp.StatusCode != http.StatusOK || env.Code != 0 {
		return &APIError{Status: resp.StatusCode, Code: env.Code, Msg: env.Msg, after: waitOf(resp.Header)}
	}
	if out == nil {
		return nil
	}
	if len(env.Data) == 0 {
		env.Data = raw // the token's and the bot's answers have no data
	}
	return json.Unmarshal(env.Data, out)
}

// request makes one request, with the token when there is one.
func (c *api) request(ctx context.Context, method, path, token string, body io.Reader, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.client.Do(req)
}

// waitOf is how long an answer asks to wait: Retry-After, or the
// gateway's x-ogw-ratelimit-reset (seconds).
func waitOf(h http.Header) time.Duration {
	if d := backoff.RetryAfter(h); d > 0 {
		return d
	}
	if s, err := strconv.Atoi(h.Get("x-ogw-ratelimit-reset")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// retryable reports whether a failed call may work when tried again:
// the network, a rate limit, a server error, or a token to replace.
func retryable(err error) (bool, time.Duration) {
	if errors.Is(err, context.Canceled) || errors.Is(err, bridge.ErrTooLarge) {
		return false, 0
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return true, 0
	}
	switch {
	case ae.tokenCode():
		return true, time.Millisecond
	case ae.Status == http.StatusTooManyRequests || ae.Code == codeRateLimited || ae.Status >= 500:
		return true, ae.after
	}
	return false, 0
}

// call runs fn with the access token until it works, fails for good or
// its attempts run out (none: until ctx ends); a refused token is
// replaced before the next try.
func (c *api) call(ctx context.Context, what string, attempts int, fn func(ctx context.Context, token string) error) error {
	p := backoff.Policy{Attempts: attempts, Initial: 500 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.2, Sleep: c.sleep,
		OnRetry: func(err error, wait time.Duration) {
			c.observer.Retried("feishu")
			c.log.Warn("feishu: a call to the open platform failed; trying again", "call", what, "wait", wait, "err", err)
		}}
	return p.Do(ctx, retryable, func(ctx context.Context) error {
		token, err := c.tenantToken(ctx)
		if err != nil {
			return err
		}
		err = fn(ctx, token)
		if ae, ok := errors.AsType[*APIError](err); ok && ae.tokenCode() {
			c.forget(token)
		}
		return err
	})
}

// identify fetches the app's token and the bot's open id, trying again
// while the platform cannot be reached; an error means Feishu refused
// the app's credentials, or the app has no bot.
func (c *api) identify(ctx context.Context) (string, error) {
	var out struct {
		Bot struct {
			OpenID  string `json:"open_id"`
			AppName string `json:"app_name"`
		} `json:"bot"`
	}
	err := c.call(ctx, "bot info", 0, func(ctx context.Context, token string) error {
		return c.send(ctx, http.MethodGet, "/open-apis/bot/v3/info", token, nil, "", &out)
	})
	if err != nil {
		return "", fmt.Errorf("feishu: the open platform refused the app (check feishu.app_id and feishu.app_secret, and that the app has the bot ability): %w", err)
	}
	if out.Bot.OpenID == "" {
		return "", errors.New("feishu: the app has no bot: add the bot ability in the developer console")
	}
	return out.Bot.OpenID, nil
}

// sendAttempts is how often a message or an upload is tried.
const sendAttempts = 5

// message sends a message of type kind with content (its JSON) to r,
// and returns its id. uuid, when set, makes the platform send it once
// whatever the tries (it keeps the key an hour).
func (c *api) message(ctx context.Context, r route, kind string, content any, uuid string) (string, error) {
	text, err := json.Marshal(content)
	if err != nil {
		return "", err
	}
	body := map[string]string{"receive_id": r.To, "msg_type": kind, "content": string(text)}
	if uuid != "" {
		body["uuid"] = uuid
	}
	raw, _ := json.Marshal(body)
	var out struct {
		MessageID string `json:"message_id"`
	}
	err = c.call(ctx, "send a message", sendAttempts, func(ctx context.Context, token string) error {
		return c.send(ctx, http.MethodPost, "/open-apis/im/v1/messages?receive_id_type="+r.Type, token,
			bytes.NewReader(raw), "application/json; charset=utf-8", &out)
	})
	return out.MessageID, err
}
