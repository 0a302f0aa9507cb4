package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// setWebhook points Telegram at WebhookURL, retrying until it works.
func (a *Adapter) setWebhook(ctx context.Context) {
	p := tgbotapi.Params{"url": a.cfg.WebhookURL, "secret_token": a.cfg.WebhookSecret, "allowed_updates": `["message","callback_query"]`}
	b := a.policy(0).New()
	for {
		_, err := a.call(ctx, "setWebhook", p)
		if err == nil || ctx.Err() != nil {
			return
		}
		a.log.Error("telegram: setWebhook failed; retrying (check telegram.webhook_url)", "err", err)
		if b.Wait(ctx, b.Next()) != nil {
			return
		}
	}
}

// ServeHTTP receives webhook updates. A request without the configured
// secret in X-Telegram-Bot-Api-Secret-Token is rejected with 401. An
// update is answered 200 once it is in the inbox; a store failure answers
// 500 so Telegram delivers it again.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
	if a.cfg.WebhookSecret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.WebhookSecret)) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a.mu.Lock()
	ready := a.ready
	a.mu.Unlock()
	if !ready {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	var u update
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&u); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, "update too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad update", http.StatusBadRequest)
		return
	}
	if _, err := a.accept(r.Context(), []update{u}); err != nil {
		a.log.Error("telegram: could not store a webhook update", "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}
