package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
)

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

func TestMetricsMoveAfterATurn(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	tg.Hold("getMe", 0)
	addr, _ := serveTelegram(t, tg, model, "")
	base := "http://" + addr
	// Not connected yet: not ready, though alive.
	if resp, err := http.Get(base + "/readyz"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz before Telegram answered: %v %v", resp.StatusCode, err)
	}
	scrape(t, base+"/healthz")
	tg.Resume("getMe")
	tg.WaitFor(t, "ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	model.Call("load_tool_group", `{"group_name":"config"}`)
	model.Text("done")
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "load config"})
	tg.WaitSent(t, 1)
	tg.WaitFor(t, "the turn counted", func() bool {
		return strings.Contains(scrape(t, base+"/metrics"), `loadout_turns_total{channel="telegram",outcome="answered"} 1`)
	})
	out := scrape(t, base+"/metrics")
	for _, want := range []string{
		`loadout_model_request_duration_seconds_count{outcome="ok"} 2`,
		`loadout_model_tokens_total{direction="prompt"} 20`,
		`loadout_model_tokens_total{direction="completion"} 10`,
		`loadout_tool_calls_total{status="success",tool="load_tool_group"} 1`,
		`loadout_group_loads_total{group="config"} 1`,
		`loadout_sends_total{channel="telegram",outcome="ok"} 1`,
		`loadout_turn_duration_seconds_count{channel="telegram"} 1`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(out, `loadout_inbox_open{channel="telegram"} 1`) {
		t.Errorf("the finished event still counts as open")
	}
	// An answer the platform has not taken yet is in the backlog.
	tg.Hold("sendMessage", 0)
	model.Text("held")
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "again"})
	tg.WaitFor(t, "the backlog gauge", func() bool {
		return strings.Contains(scrape(t, base+"/metrics"), `loadout_inbox_open{channel="telegram"} 1`)
	})
	if !strings.Contains(scrape(t, base+"/metrics"), `loadout_inbox_oldest_age_seconds{channel="telegram"}`) {
		t.Error("no age of the oldest open event")
	}
	tg.Resume("sendMessage")
}
