package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/bridge/slack"
	"loadout/bridge/telegram"
	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/settings"
)

// Secrets used below; each must never reach a log line.
const (
	tgToken      = "7012345678:AAHk2m9SecretTelegramTokenValue_x1"
	slackBot     = "xoxb-1111-2222-SecretSlackBotToken"
	slackApp     = "xapp-1-A111-SecretSlackAppToken"
	signing      = "8f14e45fceea167a5a36dedd4bea2543"
	llmKey       = "sk-proj-SecretOpenAIKeyValue0123456789"
	clientSecret = "GOCSPX-SecretGoogleClientSecret"
	tokenKey     = "c2VjcmV0LWtleS1zZWNyZXQta2V5LXNlY3JldC1rZXk="
	googleAccess = "ya29.a0AfH6SMBSecretAccessToken"
	googleRefr   = "1//0gSecretRefreshToken-abcdef"
	voiceKey     = "gsk_SecretSpeechServerKey42"
	uiToken      = "operator-console-token-7f3a9c"
)

var allSecrets = []string{tgToken, slackBot, slackApp, signing, llmKey, clientSecret, tokenKey, googleAccess, googleRefr, voiceKey,
	"AAHk2m9SecretTelegramTokenValue_x1", fallbackKey, uiToken}

func secretConfig() settings.Config {
	cfg, _ := settings.Parse(nil, env(nil))
	cfg.LLM.APIKey = llmKey
	cfg.Channels["telegram"] = telegram.Config{Token: tgToken}
	cfg.Channels["slack"] = slack.Config{BotToken: slackBot, AppToken: slackApp, SigningSecret: signing}
	cfg.Google.ClientSecret, cfg.Google.TokenKey = clientSecret, tokenKey
	cfg.Voice.APIKey = voiceKey
	cfg.UI.AdminToken = uiToken
	cfg.LLM.Failover.Fallbacks = []openai.Fallback{{BaseURL: "https://openrouter.ai/api/v1", APIKey: fallbackKey}}
	cfg.Log.Level = "debug"
	return cfg
}

func TestLoggerRedactsEverywhere(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var buf chattest.LogBuffer
		cfg := secretConfig()
		cfg.Log.Format = format
		log := cfg.Logger(&buf)
		wrapped := fmt.Errorf("refresh: %w", errors.New(`oauth2: "invalid_grant" refresh_token=`+googleRefr))
		log.With("token", tgToken, slog.Group("g", "k", slackApp)).WithGroup("req").Debug(
			"GET https://api.telegram.org/bot"+tgToken+"/getMe failed",
			"err", wrapped, "auth", "Bearer "+googleAccess, "url", "https://x/?access_token="+googleAccess+"&a=1",
			"list", []string{signing, "ok"}, slog.Group("slack", "bot", slackBot, "secret", clientSecret),
			"stringer", stringer(llmKey), "key", tokenKey, "voice", "Bearer "+voiceKey, "fallback", "key "+fallbackKey, "ui", "typed "+uiToken, "n", 42)
		out := buf.String()
		for _, s := range allSecrets {
			if strings.Contains(out, s) {
				t.Errorf("%s: log shows %q:\n%s", format, s, out)
			}
		}
		for _, keep := range []string{"getMe failed", "invalid_grant", "a=1", "ok", "42", "[REDACTED]"} {
			if !strings.Contains(out, keep) {
				t.Errorf("%s: log lost %q:\n%s", format, keep, out)
			}
		}
	}
}

type stringer string

func (s stringer) String() string { return "key " + string(s) }

// The whole process, at debug level, with Telegram and Slack unable to
// connect (their errors quote request URLs): no secret in stderr.
func TestServeLogsNoSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	cfg := fmt.Sprintf(`llm:
  api_key: %s
store:
  path: %s
http:
  listen: 127.0.0.1:0
log:
  level: debug
telegram:
  enabled: true
  token: %s
  api_endpoint: http://127.0.0.1:1/bot%%s/%%s
  allowed_users: ["1"]
slack:
  enabled: true
  bot_token: %s
  app_token: %s
  api_url: http://127.0.0.1:1/api/
  allowed_users: ["U1"]
google:
  client_id: id.apps.googleusercontent.com
  client_secret: %s
  token_key: %s
`, llmKey, filepath.Join(dir, "x.db"), tgToken, slackBot, slackApp, clientSecret, tokenKey)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs chattest.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-config", path}, strings.NewReader(""), &logs, &logs, env(nil))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !(strings.Contains(logs.String(), "telegram: cannot reach") && strings.Contains(logs.String(), "slack is not reachable")) {
		if time.Now().After(deadline) {
			t.Fatalf("channels never logged their connection errors:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	out := logs.String()
	for _, s := range allSecrets {
		if strings.Contains(out, s) {
			t.Errorf("log shows %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("the errors lost their useful part:\n%s", out)
	}
}
