package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/bridge/slack"
	"loadout/bridge/slack/slacktest"
	"loadout/chat/chattest"
	"loadout/settings"
)

// slackTestApp builds the app with Slack pointed at a fake workspace.
func slackTestApp(t *testing.T, mode string) (*app, *slacktest.Server, *chattest.ModelServer) {
	t.Helper()
	fake := slacktest.NewServer(t)
	model := chattest.NewModelServer(t)
	cfg := settings.Defaults()
	cfg.Store.Path = filepath.Join(t.TempDir(), "loadout.db")
	cfg.LLM.BaseURL, cfg.LLM.APIKey = model.URL, "test-key"
	cfg.HTTP.ShutdownGrace = settings.Duration(5 * time.Second)
	cfg.Channels = map[string]any{"slack": slack.Config{Enabled: true, BotToken: "xoxb-test", AppToken: "xapp-test", SigningSecret: "s3cret",
		Mode: mode, APIURL: fake.APIURL, AllowedUsers: []string{"UOWNER"}, Workers: 2}}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	return a, fake, model
}

func runSlack(t *testing.T, a *app) {
	t.Helper()
	chans, err := a.channels(context.Background())
	if err != nil || len(chans) != 1 || chans[0].Name() != "slack" {
		t.Fatalf("channels = %v, %v", chans, err)
	}
	r := chans[0]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		case <-time.After(slacktest.Wait):
			t.Error("Run did not return after cancel")
		}
	})
}

func TestSlackChannelSocketMode(t *testing.T) {
	a, fake, model := slackTestApp(t, "socket")
	runSlack(t, a)
	model.Text("hello from **loadout**")
	fake.Send(t, "env-1", "events_api", slacktest.Callback("Ev1", slacktest.DM("D1", "UOWNER", "hi", "1.1")), 0)
	fake.WaitAck(t, "env-1")
	p := fake.WaitCalls(t, "chat.postMessage", 1)[0].Params
	if p["channel"] != "D1" || p["text"] != "hello from *loadout*" {
		t.Fatalf("post = %v", p)
	}
	if err := a.hub.Notify(context.Background(), "slack:"+slacktest.TeamID+":D1", "notice"); err != nil {
		t.Errorf("hub: %v", err)
	}
	if p := fake.WaitCalls(t, "chat.postMessage", 2)[1].Params; p["text"] != "notice" {
		t.Errorf("outbox post = %v", p)
	}
	if n := len(fake.Calls("apps.connections.open")); n == 0 {
		t.Error("socket mode never called apps.connections.open")
	}
}

func TestSlackChannelEventsModeRegistersRoutes(t *testing.T) {
	a, fake, model := slackTestApp(t, "events")
	runSlack(t, a)
	srv := httptest.NewServer(a.mux)
	t.Cleanup(srv.Close)
	// post sends like Slack: a 503 (the adapter is still connecting) is
	// delivered again.
	post := func(path string, body []byte, h http.Header) (int, string) {
		deadline := time.Now().Add(slacktest.Wait)
		for {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
			for k, v := range h {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				return resp.StatusCode, string(out)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	body, _ := json.Marshal(map[string]string{"type": "url_verification", "challenge": "c1"})
	if code, _ := post("/slack/events", body, nil); code != http.StatusUnauthorized {
		t.Errorf("unsigned request: %d", code)
	}
	if code, out := post("/slack/events", body, slacktest.Sign("s3cret", time.Now(), body)); code != 200 || !strings.Contains(out, "c1") {
		t.Errorf("url_verification: %d %s", code, out)
	}
	model.Text("events answer")
	ev, _ := json.Marshal(slacktest.Callback("Ev1", slacktest.DM("D1", "UOWNER", "hi", "1.1")))
	if code, _ := post("/slack/events", ev, slacktest.Sign("s3cret", time.Now(), ev)); code != 200 {
		t.Errorf("event: %d", code)
	}
	if p := fake.WaitCalls(t, "chat.postMessage", 1)[0].Params; p["text"] != "events answer" {
		t.Errorf("post = %v", p)
	}
	form := slacktest.Form(slacktest.SlashCommand("D1", "UOWNER", "help", fake.ResponseURL("r1")))
	h := slacktest.Sign("s3cret", time.Now(), form)
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	if code, _ := post("/slack/commands", form, h); code != 200 {
		t.Errorf("command: %d", code)
	}
	if r := fake.WaitCalls(t, "response_url", 1)[0].Params; !strings.Contains(r["text"], "/clear") {
		t.Errorf("help response = %v", r)
	}
}

func TestSlackChannelDisabled(t *testing.T) {
	a := &app{cfg: settings.Defaults()}
	if c, err := a.channels(context.Background()); c != nil || err != nil {
		t.Errorf("disabled slack built %v %v", c, err)
	}
}
