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
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge/telegram"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/settings"
)

// serveTelegram runs the app with the Telegram channel from yaml against
// a fake Bot API; it returns the HTTP address and a stop function.
func serveTelegram(t *testing.T, tg *telegramtest.Server, model *chattest.ModelServer, extra string) (string, func()) {
	t.Helper()
	return serveTelegramFor(t, tg, model, `"42"`, extra)
}

// serveTelegramFor is serveTelegram allowing users, a YAML list's items.
func serveTelegramFor(t *testing.T, tg *telegramtest.Server, model *chattest.ModelServer, users, extra string) (string, func()) {
	t.Helper()
	raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\nhttp:\n  shutdown_grace: 5s\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n%s",
		model.URL, filepath.Join(t.TempDir(), "loadout.db"), telegramtest.Token, tg.Endpoint(), users, extra)
	cfg, err := settings.Parse([]byte(raw), env(nil))
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
	if len(chans) != 1 || chans[0].Name() != "telegram" {
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

// Found by counting connections on the serve benchmark: Go's default
// transport keeps two idle connections per host, so with eight turns at
// once most model calls and Bot API requests opened a new connection —
// against a real API, a TLS handshake each. Five waves of eight chats
// must reuse the connections the first wave opened.
func TestConnectionsToTheModelAndTheBotAPIAreReused(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	const chats, waves = 8, 5
	ids := make([]string, chats)
	for i := range ids {
		ids[i] = strconv.Itoa(100 + i)
	}
	// Without the per-chat send limit the waves follow each other at once.
	_, stop := serveTelegramFor(t, tg, model, strings.Join(ids, ", "),
		"  send_per_second: -1\n  send_per_chat_second: -1\n  send_per_group_minute: -1\n")
	defer stop()
	for w := range waves {
		for range chats {
			// Slow enough that the wave's turns overlap.
			model.Push(chattest.Step{Text: "ok", Delay: 50 * time.Millisecond})
		}
		for i := range chats {
			tg.Push(telegramtest.Message{From: telegramtest.User{ID: int64(100 + i)}, Text: fmt.Sprintf("wave %d", w)})
		}
		tg.WaitSent(t, (w+1)*chats)
	}
	// One connection per turn that can run at once, and for the Bot API
	// the long poll and the typing signs beside them.
	if n := model.Conns(); n > chats+1 {
		t.Errorf("%d connections to the model for %d turns, at most %d at once", n, chats*waves, chats)
	}
	if n := tg.Conns(); n > 2*chats {
		t.Errorf("%d connections to the Bot API for %d answers", n, chats*waves)
	}
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
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	cfg.Channels["telegram"] = telegram.Config{Enabled: true, Token: "t", Mode: "webhook", WebhookURL: "http://insecure/hook", WebhookSecret: "s", Workers: 1}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	if _, err := a.channels(context.Background()); err == nil || !strings.Contains(err.Error(), "telegram.webhook_url") {
		t.Fatal("accepted a plain-http webhook_url")
	}
}
