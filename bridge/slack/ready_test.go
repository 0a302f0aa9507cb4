package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/slack/slacktest"
	"loadout/store/storetest"
)

// An Events API delivery that arrives before the adapter knows its own
// workspace cannot be judged (a bare allowlist entry matches only there):
// it is refused with 503 and nothing is stored, so Slack delivers it again.
func TestEventsBeforeIdentifyAreDeferred(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	a := New(Config{
		BotToken: "xoxb-test", SigningSecret: secret, Mode: ModeEvents, APIURL: "http://127.0.0.1:1/",
		AllowedUsers: []string{owner}, Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
	}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	post := func(h http.Handler, body []byte, form bool) int {
		hd := slacktest.Sign(secret, time.Now(), body)
		if form {
			hd.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = hd
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	ev, _ := json.Marshal(slacktest.Callback("Ev1", slacktest.DM("D1", owner, "hi", "1.1")))
	if code := post(a.EventsHandler(), ev, false); code != http.StatusServiceUnavailable {
		t.Errorf("event before identify: %d, want 503", code)
	}
	cmd := slacktest.Form(slacktest.SlashCommand("D1", owner, "help", "https://example.invalid/r"))
	if code := post(a.CommandsHandler(), cmd, true); code != http.StatusServiceUnavailable {
		t.Errorf("command before identify: %d, want 503", code)
	}
	if items, err := env.Store.Unfinished(context.Background(), "slack"); err != nil || len(items) != 0 {
		t.Fatalf("stored before identify: %v, %v", items, err)
	}
}
