package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/settings"
)

// fallbackKey is shaped like a Groq key, which no pattern of the log filter
// knows: only the list of configured secrets keeps it out.
const fallbackKey = "gsk_SecretFallbackKeyValue9876543210"

func TestFallbacksConfig(t *testing.T) {
	cfg, err := settings.Parse([]byte(`llm:
  base_url: https://api.openai.com/v1
  api_key: sk-1
  fallbacks:
    - base_url: https://openrouter.ai/api/v1
      api_key: ${OR_KEY}
      model: meta-llama/llama-3.1-70b-instruct
      max_tokens: 800
      timeout: 30s
    - base_url: http://127.0.0.1:11434/v1
  breaker:
    failures: 5
    cooldown: 1m
`), env(map[string]string{"OR_KEY": fallbackKey}))
	if err != nil {
		t.Fatal(err)
	}
	fc := cfg.LLM.Failover
	if len(fc.Fallbacks) != 2 || fc.Fallbacks[0].APIKey != fallbackKey || fc.Fallbacks[0].Model != "meta-llama/llama-3.1-70b-instruct" ||
		fc.Fallbacks[0].MaxTokens != 800 || fc.Fallbacks[0].Timeout.Seconds() != 30 || fc.Fallbacks[1].BaseURL != "http://127.0.0.1:11434/v1" ||
		fc.Breaker.Failures != 5 || fc.Breaker.Cooldown.Minutes() != 1 {
		t.Fatalf("failover = %+v", fc)
	}
	for in, want := range map[string]string{
		"llm:\n  fallbacks:\n    - base_url: https://a/v1\n    - model: m\n":         "llm.fallbacks[1].base_url: must be set",
		"llm:\n  fallbacks:\n    - base_url: ftp://a/v1\n":                           "llm.fallbacks[0].base_url: must be an http(s) URL",
		"llm:\n  fallbacks:\n    - base_url: https://a/v1\n      modle: m\n":         `unknown key "llm.fallbacks[0].modle"`,
		"llm:\n  fallbacks:\n    - base_url: https://a/v1\n      api_key: ${NOPE}\n": "llm.fallbacks[0].api_key (line 4): environment variable NOPE is not set",
		"llm:\n  fallbacks:\n    - base_url: https://a/v1\n      max_tokens: -1\n":   "llm.fallbacks[0].max_tokens: must be 0",
		"llm:\n  fallbacks:\n    - base_url: https://a/v1\n      timeout: 10ms\n":    "llm.fallbacks[0].timeout: must be at least 1s",
		"llm:\n  fallbacks:\n    - base_url: https://a/v1\n      timeout: soon\n":    "llm.fallbacks[0].timeout",
		"llm:\n  breaker:\n    failures: 0\n":                                        "llm.breaker.failures: must be at least 1",
		"llm:\n  breaker:\n    cooldown: 1m\n    max_cooldown: 30s\n":                "llm.breaker.max_cooldown: must be at least llm.breaker.cooldown",
		"llm:\n  max_tokens: -5\n":                                                   "llm.max_tokens: must be 0",
	} {
		if _, err := settings.Parse([]byte(in), env(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
	// OpenAI's service needs a key, a fallback's too.
	cfg, err = settings.Parse([]byte("llm:\n  api_key: sk-1\n  fallbacks:\n    - base_url: https://api.openai.com/v1\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.RequireLLM(); err == nil || !strings.Contains(err.Error(), "llm.fallbacks[0].api_key") {
		t.Errorf("requireLLM = %v", err)
	}
}

// failoverConfig writes a config whose model service is primaryURL, with
// fallbackURL behind it.
func failoverConfig(t *testing.T, primaryURL, fallbackURL, level string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	raw := fmt.Sprintf(`llm:
  base_url: %s
  api_key: ${TEST_KEY}
  model: primary-model
  backoff: 1ms
  fallbacks:
    - base_url: %s
      api_key: ${FALLBACK_KEY}
      model: fallback-model
store:
  path: %s
log:
  level: %s
`, primaryURL, fallbackURL, filepath.Join(dir, "data", "loadout.db"), level)
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// `loadout chat` with the primary down: the fallback answers, with its
// own model, and /status names it.
func TestChatFailsOverToTheFallback(t *testing.T) {
	fallback := chattest.NewModelServer(t)
	fallback.Text("Answered by the fallback.")
	path := failoverConfig(t, chattest.UnreachableURL(t), fallback.URL, "error")
	out, err := runCLIEnv(t, "hello\n/status\n", map[string]string{"FALLBACK_KEY": fallbackKey}, "-config", path, "chat")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Answered by the fallback.", "Model provider: the last answer came from llm.fallbacks[0] (" + hostOf(fallback.URL) + "), model fallback-model"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "Answered by the fallback.") != 1 || strings.Contains(out, "Sorry") {
		t.Errorf("the person saw more than the one answer:\n%s", out)
	}
	if m := fallback.Last(t).Model; m != "fallback-model" {
		t.Errorf("the fallback was asked for %q", m)
	}
}

func hostOf(base string) string { return openai.Host(base) }

// Both services refuse their keys and quote them back (as some do): the
// person hears a plain sentence and, at debug level, no key of either
// reaches the log.
func TestFallbackKeyNeverReachesTheLog(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Push(chattest.Step{Status: http.StatusUnauthorized, Body: `{"error":{"message":"Incorrect API key provided: sk-test-PrimaryKeyValue42"}}`})
	fallback.Push(chattest.Step{Status: http.StatusUnauthorized, Body: `{"error":{"message":"Incorrect API key provided: ` + fallbackKey + `"}}`})
	path := failoverConfig(t, primary.URL, fallback.URL, "debug")
	out, err := runCLIEnv(t, "hello\n", map[string]string{"TEST_KEY": "sk-test-PrimaryKeyValue42", "FALLBACK_KEY": fallbackKey}, "-config", path, "chat")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "goes to the next one") || !strings.Contains(out, "rejected the API key") {
		t.Fatalf("the fail-over and the failure are not logged:\n%s", out)
	}
	for _, key := range []string{fallbackKey, "sk-test-PrimaryKeyValue42", "SecretFallbackKeyValue"} {
		if strings.Contains(out, key) {
			t.Errorf("the output shows %q:\n%s", key, out)
		}
	}
	if !strings.Contains(out, "llm.fallbacks[0] ("+hostOf(fallback.URL)+")") {
		t.Errorf("the failure does not name the fallback:\n%s", out)
	}
}

// loadout serve with Telegram streaming answers: the primary cuts its
// stream after text the person saw, then asks to be left alone for an
// hour. Each answer comes from the fallback, in the one message the
// draft became; /readyz stays 200 and says which provider is skipped;
// /metrics counts the fail-overs and shows the breaker.
func TestServeFailsOverAndStaysReady(t *testing.T) {
	tg := telegramtest.New(t)
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Push(chattest.Step{Text: "The partial answer", Cut: true})
	primary.Push(chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}, Body: `{"error":{"message":"slow down"}}`})
	gate := make(chan struct{})
	fallback.Script = func(goopenai.ChatCompletionRequest) chattest.Step {
		<-gate
		return chattest.Step{Text: "Answered by the fallback."}
	}
	raw := fmt.Sprintf(`llm:
  base_url: %s
  api_key: sk-test
  backoff: 1ms
  fallbacks:
    - base_url: %s
      api_key: %s
      model: fallback-model
store:
  path: %s
http:
  shutdown_grace: 5s
telegram:
  enabled: true
  stream: true
  token: %q
  api_endpoint: %q
  allowed_users: ["42"]
`, primary.URL, fallback.URL, fallbackKey, filepath.Join(t.TempDir(), "loadout.db"), telegramtest.Token, tg.Endpoint())
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, a, ln, chans)
	base := "http://" + ln.Addr().String()
	tg.WaitFor(t, "ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "hi"})
	// The cut text is shown as the draft before the fallback answers.
	tg.WaitFor(t, "the cut text shown", func() bool {
		s := tg.Sent()
		return len(s) == 1 && strings.Contains(s[0].Text, "The partial answer")
	})
	close(gate)
	tg.WaitFor(t, "the fallback's answer in place of the draft", func() bool {
		s := tg.Sent()
		return len(s) == 1 && s[0].Text == "Answered by the fallback."
	})
	tg.WaitFor(t, "the turn counted", func() bool {
		return strings.Contains(scrape(t, base+"/metrics"), `loadout_turns_total{channel="telegram",outcome="answered"} 1`)
	})
	if s := tg.Sent(); len(s) != 1 {
		t.Fatalf("the person got %d messages: %+v", len(s), s)
	}

	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "again"})
	tg.WaitFor(t, "the second answer", func() bool { return len(tg.Sent()) == 2 && tg.Sent()[1].Text == "Answered by the fallback." })
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "model provider llm (" + hostOf(primary.URL) + "): open, skipped until "
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) || !strings.Contains(string(body), "after rate_limited") ||
		!strings.Contains(string(body), "model provider llm.fallbacks[0] ("+hostOf(fallback.URL)+"): closed") {
		t.Fatalf("readyz = %d %q; want 200 naming the skipped primary", resp.StatusCode, body)
	}
	if strings.Contains(string(body), fallbackKey) || strings.Contains(string(body), "sk-test") {
		t.Fatalf("readyz shows a key: %s", body)
	}
	// The third message does not try the primary.
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "/status"})
	tg.WaitFor(t, "the status", func() bool { return len(tg.Sent()) == 3 })
	if st := tg.Sent()[2].Text; !strings.Contains(st, "the last answer came from llm.fallbacks[0]") || !strings.Contains(st, "model fallback-model") ||
		!strings.Contains(st, "llm ("+hostOf(primary.URL)+") is skipped until") {
		t.Errorf("/status = %q", st)
	}
	if n := len(primary.Requests()); n != 2 {
		t.Errorf("the primary got %d requests, want 2", n)
	}
	out := scrape(t, base+"/metrics")
	for _, want := range []string{
		`loadout_model_failovers_total{from="llm",reason="cut",to="llm.fallbacks[0]"} 1`,
		`loadout_model_failovers_total{from="llm",reason="rate_limited",to="llm.fallbacks[0]"} 1`,
		`loadout_model_provider_requests_total{outcome="failed",provider="llm"} 2`,
		`loadout_model_provider_requests_total{outcome="ok",provider="llm.fallbacks[0]"} 2`,
		`loadout_model_provider_failures_total{provider="llm",reason="cut"} 1`,
		`loadout_model_provider_breaker_state{provider="llm"} 2`,
		`loadout_model_provider_breaker_state{provider="llm.fallbacks[0]"} 0`,
		`loadout_model_request_duration_seconds_count{outcome="ok"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A turn whose service fails between rounds: the fallback gets the
// round's tool call and result, in the same order and bytes the primary
// was sent them.
func TestATurnKeepsItsToolCallsAcrossASwitch(t *testing.T) {
	primary, fallback := chattest.NewModelServer(t), chattest.NewModelServer(t)
	primary.Call("get_current_time", `{}`)
	for range 4 {
		primary.Fail(http.StatusBadGateway)
	}
	fallback.Text("It is noon.")
	path := failoverConfig(t, primary.URL, fallback.URL, "error")
	out, err := runCLIEnv(t, "what time is it?\n", map[string]string{"FALLBACK_KEY": fallbackKey}, "-config", path, "chat")
	if err != nil || !strings.Contains(out, "It is noon.") {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := primary.Requests()
	if len(reqs) != 5 {
		t.Fatalf("the primary got %d requests, want 1 + 4 attempts", len(reqs))
	}
	got := fallback.Last(t).Messages
	if len(got) != 4 || got[2].Role != "assistant" || len(got[2].ToolCalls) != 1 || got[2].ToolCalls[0].Function.Name != "get_current_time" ||
		got[3].Role != "tool" || got[3].ToolCallID != got[2].ToolCalls[0].ID {
		t.Fatalf("the fallback got %+v", got)
	}
	if p, f := requestMessages(t, primary.Bodies()[1]), requestMessages(t, fallback.Bodies()[0]); p != f {
		t.Errorf("the fallback's messages differ from the primary's:\n%s\n%s", p, f)
	}
}

// requestMessages is a request body's messages, byte for byte.
func requestMessages(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return string(req.Messages)
}

// serve starts with its model service down, and /readyz answers 200,
// naming each service's state.
func TestServeStartsWithTheServiceDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := failoverConfig(t, chattest.UnreachableURL(t), chattest.UnreachableURL(t), "error")
	var logs chattest.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-config", path}, strings.NewReader(""), &logs, &logs,
			env(map[string]string{"TEST_KEY": "sk-test", "FALLBACK_KEY": fallbackKey, "LOADOUT_HTTP_LISTEN": addr}))
	}()
	var body string
	chattest.Eventually(t, "/readyz", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, logs.String())
	}
	for _, want := range []string{"ready\n", "model provider llm (", "model provider llm.fallbacks[0] ("} {
		if !strings.Contains(body, want) {
			t.Errorf("readyz lacks %q:\n%s", want, body)
		}
	}
}
