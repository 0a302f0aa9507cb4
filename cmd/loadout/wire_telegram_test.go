package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"loadout/bridge/telegram"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
)

// serveTelegram runs the app with the Telegram channel from yaml against
// a fake Bot API; it returns the HTTP address and a stop function.
func serveTelegram(t *testing.T, tg *telegramtest.Server, model *chattest.ModelServer, extra string) (string, func()) {
	t.Helper()
	raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\nhttp:\n  shutdown_grace: 5s\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [\"42\"]\n%s",
		model.URL, filepath.Join(t.TempDir(), "loadout.db"), telegramtest.Token, tg.Endpoint(), extra)
	cfg, err := parseConfig([]byte(raw), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	chans, err := a.channels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(chans) != 1 || chans[0].name != "telegram" {
		t.Fatalf("channels = %v", chans)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln.Addr().String(), startRun(t, a, ln, chans)
}

func TestServeRunsTelegramBot(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	model.Text("Hello from **loadout**")
	_, stop := serveTelegram(t, tg, model, "")
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42, UserName: "ana"}, Text: "hi"})
	sent := tg.WaitSent(t, 1)
	if sent[0].Text != "Hello from <b>loadout</b>" || sent[0].ChatID != 42 {
		t.Fatalf("sent %+v", sent[0])
	}
	stop()
}

func TestServeMountsTelegramWebhook(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	model.Text("hooked")
	addr, _ := serveTelegram(t, tg, model,
		"  mode: webhook\n  webhook_url: https://bot.example.org/tg/hook\n  webhook_secret: s3cret\n")
	tg.WaitFor(t, "setWebhook", func() bool { return len(tg.Calls("setWebhook")) == 1 })
	_, body := tg.Update(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "over the hook"})
	post := func(secret string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/tg/hook", bytes.NewReader(body))
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(""); c != http.StatusUnauthorized {
		t.Fatalf("without the secret: %d", c)
	}
	if c := post("s3cret"); c != http.StatusOK {
		t.Fatalf("with the secret: %d", c)
	}
	if s := tg.WaitSent(t, 1); s[0].Text != "hooked" {
		t.Fatalf("sent %+v", s[0])
	}
}

func TestTelegramWebhookURLMustBeHTTPS(t *testing.T) {
	cfg, _ := parseConfig(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.Telegram = TelegramConfig{Enabled: true, Config: telegram.Config{Token: "t", Mode: "webhook", WebhookURL: "http://insecure/hook", WebhookSecret: "s", Workers: 1}}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	if _, _, err := a.telegramChannel(context.Background()); err == nil {
		t.Fatal("accepted a plain-http webhook_url")
	}
}
