package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"loadout/bridge"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// maxBody bounds an Events API request.
const maxBody = 1 << 20

// EventsHandler serves the Events API (mount it at /slack/events). Every
// request must carry a valid v0 signature made with the signing secret
// and a timestamp within five minutes. It answers url_verification and
// acknowledges a callback once it is stored; the turn runs afterwards.
// Redelivered events (X-Slack-Retry-Num) are recognised by their event id,
// acknowledged and dropped. A callback that cannot be stored is answered
// 500 (503 while shutting down), so Slack delivers it again.
func (a *Adapter) EventsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verify(w, r)
		if !ok {
			return
		}
		ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
		if err != nil {
			if ev.Type == "" {
				http.Error(w, "malformed event", http.StatusBadRequest)
				return
			}
			// An event type this version does not know: acknowledge it.
			a.log.Debug("slack event not understood; ignored", "err", err)
			w.WriteHeader(http.StatusOK)
			return
		}
		switch ev.Type {
		case slackevents.URLVerification:
			v, _ := ev.Data.(*slackevents.EventsAPIURLVerificationEvent)
			if v == nil {
				http.Error(w, "malformed event", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"challenge": v.Challenge})
			return
		case slackevents.CallbackEvent:
			if err := a.callback(r.Context(), ev); err != nil {
				a.refuse(w, err)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})
}

// CommandsHandler serves slash commands (mount it at /slack/commands),
// with the same signature checks as EventsHandler. It acknowledges at
// once the command is stored; the answer follows through the command's
// response URL. A replayed request (same trigger) is answered once.
func (a *Adapter) CommandsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verify(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		cmd, err := slackapi.SlashCommandParse(r)
		if err != nil {
			http.Error(w, "malformed command", http.StatusBadRequest)
			return
		}
		if err := a.slash(r.Context(), cmd, commandID(cmd, body)); err != nil {
			a.refuse(w, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// verify reads the body and checks the request's signature and age. On
// failure it has already answered.
func (a *Adapter) verify(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	sv, err := slackapi.NewSecretsVerifier(r.Header, a.cfg.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		reason := "bad signature"
		if errors.Is(err, slackapi.ErrExpiredTimestamp) {
			reason = "stale timestamp"
		}
		a.log.Warn("slack request rejected; check slack.signing_secret", "reason", reason, "remote", r.RemoteAddr)
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// refuse answers a request whose event could not be stored, so that
// Slack delivers it again.
func (a *Adapter) refuse(w http.ResponseWriter, err error) {
	if errors.Is(err, bridge.ErrStopped) || errors.Is(err, errNotReady) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	a.log.Error("slack event not stored; Slack will deliver it again", "err", err)
	http.Error(w, "try again", http.StatusInternalServerError)
}
