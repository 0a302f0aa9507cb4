package telegram

import (
	"context"
	"errors"
	"net/http"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/backoff"
)

// requestTimeout bounds every request but the long poll.
const requestTimeout = 30 * time.Second

// callAttempts is how often a method is tried when Telegram is busy,
// rate limiting or unreachable.
const callAttempts = 6

// policy is the channel's retry schedule with the given number of
// attempts (0: until ctx ends).
func (a *Adapter) policy(attempts int) backoff.Policy {
	return backoff.Policy{Attempts: attempts, Initial: time.Second, Max: a.cfg.MaxBackoff,
		Sleep:   func(ctx context.Context, d time.Duration) error { return a.sleep(ctx, d) },
		OnRetry: func(error, time.Duration) { a.cfg.Observer.Retried("telegram") }}
}

// api returns the bot with requests bound to ctx.
func (a *Adapter) api(ctx context.Context) *tgbotapi.BotAPI {
	a.mu.Lock()
	b := *a.bot
	a.mu.Unlock()
	b.Client = doer{ctx, a.cfg.HTTPClient}
	return &b
}

// request calls a Bot API method once.
func (a *Adapter) request(ctx context.Context, method string, p tgbotapi.Params) (*tgbotapi.APIResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return a.api(ctx).MakeRequest(method, p)
}

// call calls a method, waiting out 429s (retry_after) and retrying server
// and network errors a few times.
func (a *Adapter) call(ctx context.Context, method string, p tgbotapi.Params) (*tgbotapi.APIResponse, error) {
	var resp *tgbotapi.APIResponse
	err := a.policy(callAttempts).Do(ctx, retryable, func(ctx context.Context) error {
		var err error
		resp, err = a.request(ctx, method, p)
		if err != nil && ctx.Err() == nil {
			a.log.Info("telegram: request failed", "method", method, "err", err)
		}
		return err
	})
	return resp, err
}

// retryable: a 429 waits its retry_after; other Bot API refusals below 500
// are final; server and network errors are tried again.
func retryable(err error) (bool, time.Duration) {
	var te *tgbotapi.Error
	switch {
	case errors.As(err, &te) && te.Code == http.StatusTooManyRequests:
		return true, retryAfter(te)
	case errors.As(err, &te) && te.Code < 500:
		return false, 0
	case errors.Is(err, context.Canceled):
		return false, 0
	}
	return true, 0
}

func retryAfter(te *tgbotapi.Error) time.Duration {
	if te.RetryAfter > 0 {
		return time.Duration(te.RetryAfter) * time.Second
	}
	return time.Second
}

// optionalFailed logs a failed optional call: a warning the first time per
// method, debug after.
func (a *Adapter) optionalFailed(method string, err error) {
	if _, seen := a.warnOnce.LoadOrStore(method, true); seen {
		a.log.Debug("telegram: optional call failed", "method", method, "err", err)
		return
	}
	a.log.Warn("telegram: optional call failed; going on without it", "method", method, "err", err)
}

// setCommands registers the router's commands as the bot's menu.
func (a *Adapter) setCommands(ctx context.Context) {
	var cmds []tgbotapi.BotCommand
	for _, c := range a.router.Commands() {
		desc := c.Help
		if desc == "" {
			desc = c.Name
		}
		if r := []rune(desc); len(r) > 256 {
			desc = string(r[:256])
		}
		cmds = append(cmds, tgbotapi.BotCommand{Command: c.Name, Description: desc})
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := a.api(rctx).Request(tgbotapi.NewSetMyCommands(cmds...)); err != nil && ctx.Err() == nil {
		a.optionalFailed("setMyCommands", err)
	}
}

// doer binds every request of the client library to a context, which the
// library itself does not do.
type doer struct {
	ctx context.Context
	c   *http.Client
}

func (d doer) Do(req *http.Request) (*http.Response, error) {
	return d.c.Do(req.WithContext(d.ctx))
}
