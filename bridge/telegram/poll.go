package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/backoff"
)

// offsetKey is the state key of the update offset.
const offsetKey = "telegram:offset"

// poll long-polls getUpdates until ctx is done. The offset advances only
// after every update of a batch is in the inbox. What a getUpdates
// brings, or its error, is handled only once st is done: the first
// request goes out while getMe and the pipeline's resumption run (Run),
// and poll returns if they did not succeed.
func (a *Adapter) poll(ctx context.Context, st *startup) {
	var offset int64
	err := a.policy(0).Do(ctx, backoff.Always, func(ctx context.Context) error {
		v, err := a.store.State(ctx, offsetKey)
		if err == nil && v != "" {
			offset, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil && ctx.Err() == nil {
			a.log.Error("telegram: cannot read the update offset, retrying", "err", err)
		}
		return err
	})
	if err != nil {
		return
	}
	b := a.policy(0).New()
	for ctx.Err() == nil {
		ups, err := a.updates(ctx, offset)
		select {
		case <-st.done:
		case <-ctx.Done():
			return
		}
		if st.err != nil || !st.piped || ctx.Err() != nil {
			return
		}
		if err == nil {
			var next int64
			next, err = a.accept(ctx, ups)
			if err == nil && next > offset {
				offset = next
				if err := a.store.SetState(ctx, offsetKey, strconv.FormatInt(offset, 10)); err != nil && ctx.Err() == nil {
					// The updates are in the inbox: a redelivery is recognised.
					a.log.Error("telegram: cannot store the update offset", "err", err)
				}
			}
		}
		if err == nil {
			b.Reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait := b.Next()
		var te *tgbotapi.Error
		if errors.As(err, &te) && te.Code == http.StatusTooManyRequests {
			wait = retryAfter(te)
		}
		if errors.As(err, &te) && te.Code == http.StatusConflict && strings.Contains(te.Message, "webhook") {
			// A webhook left by a run in webhook mode. It is removed here,
			// when it is in the way, not by a call at every start.
			_, derr := a.request(ctx, "deleteWebhook", tgbotapi.Params{})
			if derr == nil {
				a.log.Info("telegram: removed the webhook an earlier run set, to poll for updates")
				b.Reset()
				continue
			}
			a.log.Warn("telegram: getUpdates conflicts with a webhook and removing it failed, retrying", "err", derr, "wait", wait)
		} else if errors.As(err, &te) && te.Code == http.StatusConflict {
			a.log.Error("telegram: getUpdates conflicts with another running instance of this bot", "err", err)
		} else {
			a.log.Warn("telegram: getUpdates failed, retrying", "err", err, "wait", wait)
		}
		if b.Wait(ctx, wait) != nil {
			return
		}
	}
}

// updates fetches one batch, waiting up to PollTimeout for it.
func (a *Adapter) updates(ctx context.Context, offset int64) ([]update, error) {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.PollTimeout+15*time.Second)
	defer cancel()
	resp, err := a.api(rctx).Request(tgbotapi.UpdateConfig{
		Offset: int(offset), Timeout: int(a.cfg.PollTimeout / time.Second), AllowedUpdates: []string{"message", "callback_query"},
	})
	if err != nil {
		return nil, err
	}
	var ups []update
	if err := json.Unmarshal(resp.Result, &ups); err != nil {
		return nil, fmt.Errorf("decode getUpdates: %w", err)
	}
	return ups, nil
}
