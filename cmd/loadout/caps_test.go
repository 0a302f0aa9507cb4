package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/bridge/slack"
	"loadout/bridge/slack/slacktest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/settings"
)

// Through the whole process on the Telegram fake: a person past
// limits.daily_tokens_per_person reads the cap's sentence and the model
// is not asked; /status shows what is left; /metrics has the spend by
// person and by chat.
func TestSpendCapOnTelegram(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	addr, stop := serveTelegram(t, tg, model, "limits:\n  daily_tokens_per_person: 100\n")
	defer stop()
	model.Push(chattest.Step{Text: "A first answer.", Usage: chat.Usage{PromptTokens: 70, CompletionTokens: 40}})
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "hello"})
	tg.WaitSent(t, 1)
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "once more"})
	sent := tg.WaitSent(t, 2)
	// As Telegram's HTML carries it.
	if got := sent[1].Text; !strings.HasPrefix(got, "Sorry, you have used up today&#39;s allowance of 100 tokens (limits.daily_tokens_per_person), so I can&#39;t pass this message on to the model. It starts again at 00:00 UTC, in ") {
		t.Fatalf("refusal %q", got)
	}
	if n := len(model.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "/status"})
	sent = tg.WaitSent(t, 3)
	if !strings.Contains(sent[2].Text, "You have 0 of 100 tokens left today (limits.daily_tokens_per_person; resets in ") {
		t.Fatalf("/status %q", sent[2].Text)
	}
	out := scrape(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`loadout_spend_person_tokens_total{person="telegram:42"} 110`,
		`loadout_spend_chat_tokens_total{chat="telegram:42"} 110`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A cap in money without prices is refused naming the keys.
func TestCostCapNeedsPrices(t *testing.T) {
	_, err := settings.Parse([]byte("llm:\n  api_key: k\nlimits:\n  daily_cost_per_person: 2\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "limits: a cap in money") || !strings.Contains(err.Error(), "llm.prices") {
		t.Fatalf("err = %v", err)
	}
	_, err = settings.Parse([]byte("llm:\n  api_key: k\n  prices:\n    gpt-4o-mini: {input: 0.15, output: -1}\nlimits:\n  daily_cost_per_person: 2\n  daily_tokens_per_chat: -5\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "llm.prices.gpt-4o-mini.output") || !strings.Contains(err.Error(), "limits.daily_tokens_per_chat") {
		t.Fatalf("err = %v", err)
	}
	cfg, err := settings.Parse([]byte("llm:\n  api_key: k\n  prices:\n    gpt-4o-mini: {input: 0.15, cached_input: 0.075, output: 0.6}\nlimits:\n  daily_cost_per_person: 2\n"), env(nil))
	if err != nil || cfg.LLM.Engine.Prices["gpt-4o-mini"] != (chat.Price{Input: 0.15, CachedInput: 0.075, Output: 0.6}) || cfg.Limits.DailyCostPerPerson != 2 {
		t.Fatalf("cfg %+v %+v, %v", cfg.LLM.Engine.Prices, cfg.Limits, err)
	}
}

// The caps can be set from the environment, as every key can.
func TestCapsFromTheEnvironment(t *testing.T) {
	cfg, err := settings.Parse([]byte("llm:\n  api_key: k\n"), env(map[string]string{"LOADOUT_LIMITS_DAILY_TOKENS_PER_PERSON": "5000", "LOADOUT_LIMITS_CAP_ADMINS": "true"}))
	if err != nil || cfg.Limits.DailyTokensPerPerson != 5000 || !cfg.Limits.CapAdmins {
		t.Fatalf("limits %+v, %v", cfg.Limits, err)
	}
}

// On Slack too, a person past a cap reads the sentence in the chat and
// the model is not asked.
func TestSpendCapOnSlack(t *testing.T) {
	fake := slacktest.NewServer(t)
	model := chattest.NewModelServer(t)
	cfg := settings.Defaults()
	cfg.Store.Path = filepath.Join(t.TempDir(), "loadout.db")
	cfg.LLM.BaseURL, cfg.LLM.APIKey = model.URL, "test-key"
	cfg.HTTP.ShutdownGrace = settings.Duration(5 * time.Second)
	cfg.Limits.DailyTokensPerChat = 15
	cfg.Channels = map[string]any{"slack": slack.Config{Enabled: true, BotToken: "xoxb-test", AppToken: "xapp-test", SigningSecret: "s3cret",
		Mode: "socket", APIURL: fake.APIURL, AllowedUsers: []string{"UOWNER"}, Workers: 2}}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	runSlack(t, a)
	model.Text("first")
	fake.Send(t, "env-1", "events_api", slacktest.Callback("Ev1", slacktest.DM("D1", "UOWNER", "hi", "1.1")), 0)
	fake.WaitCalls(t, "chat.postMessage", 1)
	fake.Send(t, "env-2", "events_api", slacktest.Callback("Ev2", slacktest.DM("D1", "UOWNER", "again", "1.2")), 0)
	p := fake.WaitCalls(t, "chat.postMessage", 2)[1].Params
	if text := p["text"]; !strings.HasPrefix(text, "Sorry, this chat has used up today's allowance of 15 tokens (limits.daily_tokens_per_chat), so I can't pass this message on to the model. It starts again at 00:00 UTC, in ") {
		t.Fatalf("post = %v", p)
	}
	if n := len(model.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}
