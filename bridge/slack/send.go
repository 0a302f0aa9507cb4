package slack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"loadout/backoff"
	"loadout/bridge"
)

// Split cuts a Markdown answer into the parts posted as separate
// messages, never inside a code block.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, a.cfg.ChunkSize) }

// Send posts one part to the route: in the channel or thread, or as a
// slash command's private answer.
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	return a.deliver(ctx, r, nil, Mrkdwn(part), nil)
}

// deliver posts body (with blocks, when given) to the route: in the
// channel or thread, as a slash command's private answer, or by updating
// draft into it — posted anew when the draft was deleted meanwhile.
func (a *Adapter) deliver(ctx context.Context, r route, draft []byte, body string, blocks []slackapi.Block) error {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(body, false)}
	var hook *slackapi.Blocks
	if blocks != nil {
		opts = append(opts, slackapi.MsgOptionBlocks(blocks...))
		hook = &slackapi.Blocks{BlockSet: blocks}
	}
	switch {
	case r.Ephemeral && r.ResponseURL != "":
		return a.retry(ctx, "response_url", func(ctx context.Context) error {
			return slackapi.PostWebhookCustomHTTPContext(ctx, r.ResponseURL, a.cfg.HTTPClient,
				&slackapi.WebhookMessage{Text: body, Blocks: hook, ResponseType: slackapi.ResponseTypeEphemeral})
		})
	case r.Ephemeral:
		return a.retry(ctx, "chat.postEphemeral", func(ctx context.Context) error {
			_, err := a.api.PostEphemeralContext(ctx, r.Channel, r.User, opts...)
			return err
		})
	case draft != nil:
		err := a.retry(ctx, "chat.update", func(ctx context.Context) error {
			_, _, _, err := a.api.UpdateMessageContext(ctx, r.Channel, string(draft), opts...)
			return err
		})
		if !slackError(err, "message_not_found") {
			return err
		}
	}
	if r.Thread != "" {
		opts = append(opts, slackapi.MsgOptionTS(r.Thread))
	}
	return a.retry(ctx, "chat.postMessage", func(ctx context.Context) error {
		_, _, err := a.api.PostMessageContext(ctx, r.Channel, opts...)
		return err
	})
}

// Draft shows the answer so far: the first call posts it, later ones
// update that message. An ephemeral answer (a slash command's) is not
// drafted: it cannot be updated by the bot, so Draft posts nothing and
// the answer is sent whole.
func (a *Adapter) Draft(ctx context.Context, rt any, draft []byte, text string) ([]byte, error) {
	r, err := asRoute(rt)
	if err != nil {
		return nil, err
	}
	if r.Ephemeral {
		return nil, nil
	}
	body := draftText(text, a.cfg.ChunkSize)
	if draft != nil {
		return draft, a.update(ctx, r, draft, body)
	}
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(body, false)}
	if r.Thread != "" {
		opts = append(opts, slackapi.MsgOptionTS(r.Thread))
	}
	var ts string
	err = a.retry(ctx, "chat.postMessage", func(ctx context.Context) error {
		var err error
		_, ts, err = a.api.PostMessageContext(ctx, r.Channel, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return []byte(ts), nil
}

// Replace updates the draft into part, formatted as Send formats it; a
// draft deleted meanwhile is posted anew.
func (a *Adapter) Replace(ctx context.Context, rt any, draft []byte, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	return a.deliver(ctx, r, draft, Mrkdwn(part), nil)
}

func (a *Adapter) update(ctx context.Context, r route, ts []byte, body string) error {
	return a.retry(ctx, "chat.update", func(ctx context.Context) error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, r.Channel, string(ts), slackapi.MsgOptionText(body, false))
		return err
	})
}

// draftText is the answer so far, plain (its Markdown may be cut
// half-way), within one message of limit bytes and marked unfinished.
func draftText(text string, limit int) string {
	const more = " …"
	if len(text)+len(more) > limit {
		cut := max(limit-len(more), 0)
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return strings.TrimRightFunc(text, unicode.IsSpace) + more
}

// Working puts a reaction on the person's message until stop is called.
// A reaction already there (left by a run cut short before a restart) is
// taken over, so it is removed when this answer is sent. stop removes it
// even when ctx was cancelled by a shutdown, trying for a few seconds.
func (a *Adapter) Working(ctx context.Context, rt any) (stop func()) {
	r, ok := rt.(route)
	if !ok || r.TS == "" || r.Ephemeral {
		return func() {}
	}
	ref := slackapi.NewRefToMessage(r.Channel, r.TS)
	if err := a.retry(ctx, "reactions.add", func(ctx context.Context) error {
		return a.api.AddReactionContext(ctx, WorkingReaction, ref)
	}); err != nil && !slackError(err, "already_reacted") {
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if err := a.retry(ctx, "reactions.remove", func(ctx context.Context) error {
				return a.api.RemoveReactionContext(ctx, WorkingReaction, ref)
			}); err != nil && !slackError(err, "no_reaction") {
				a.log.Warn("slack reaction not removed", "err", err)
			}
		})
	}
}

// cleanupTimeout bounds removing the working reaction after a shutdown
// cancelled the turn.
const cleanupTimeout = 5 * time.Second

// slackError reports whether err is Slack's error answer code.
func slackError(err error, code string) bool {
	se, ok := errors.AsType[slackapi.SlackErrorResponse](err)
	return ok && se.Err == code
}

// policy is the channel's retry schedule with the given number of
// attempts (0: until ctx ends).
func (a *Adapter) policy(attempts int) backoff.Policy {
	return backoff.Policy{Attempts: attempts, Initial: a.cfg.Backoff, Max: time.Hour,
		Sleep:   func(ctx context.Context, d time.Duration) error { return a.sleep(ctx, d) },
		OnRetry: func(error, time.Duration) { a.cfg.Observer.Retried("slack") }}
}

// retry calls fn until it succeeds, fails for good, or Attempts run out.
// A rate limit waits its Retry-After; other transient failures back off.
func (a *Adapter) retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	err := a.policy(a.cfg.Attempts).Do(ctx, classify, func(ctx context.Context) error {
		err := fn(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.Debug("slack call failed", "method", what, "err", err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("slack %s: %w", what, err)
	}
	return nil
}

// classify reports whether err is worth another attempt and how long
// Slack asked to wait first.
func classify(err error) (bool, time.Duration) {
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		return true, rl.RetryAfter
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false, 0
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code >= 500 || sc.Code == http.StatusRequestTimeout, 0
	}
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return true, 0
		}
		return false, 0
	}
	var ne net.Error
	return errors.As(err, &ne), 0
}
