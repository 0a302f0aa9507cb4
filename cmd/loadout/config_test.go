package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSampleConfigLoads(t *testing.T) {
	cfg, err := loadConfig("../../config.yaml", env(map[string]string{"OPENAI_API_KEY": "sk-test"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKey != "sk-test" || cfg.LLM.MaxToolRounds != 20 || cfg.Store.Path != "data/loadout.db" ||
		cfg.Tools.Routing != "groups" || cfg.HTTP.Listen != "127.0.0.1:8080" || cfg.LLM.Timeout.Std() != 120*time.Second {
		t.Fatalf("sample config = %+v", cfg)
	}
	if err := cfg.requireLLM(); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyConfigGivesDefaults(t *testing.T) {
	cfg, err := parseConfig([]byte(""), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.BaseURL != "https://api.openai.com/v1" || cfg.Telegram.APIEndpoint != "https://api.telegram.org/bot%s/%s" {
		t.Fatalf("defaults = %+v", cfg)
	}
	err = cfg.requireLLM()
	if err == nil || !strings.Contains(err.Error(), "llm.api_key") {
		t.Fatalf("missing key error = %v", err)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	cases := map[string]string{
		"llm:\n  modle: x\n":                                             `"llm.modle"`,
		"lm:\n  model: x\n":                                              `"lm"`,
		"llm:\n  max_tool_rounds: many\n":                                "llm.max_tool_rounds",
		"llm:\n  max_tool_rounds: 0\n":                                   "llm.max_tool_rounds",
		"llm:\n  max_tool_calls: 0\n":                                    "llm.max_tool_calls",
		"llm:\n  timeout: soon\n":                                        "llm.timeout",
		"llm:\n  base_url: ftp://x\n":                                    "llm.base_url",
		"tools:\n  routing: some\n":                                      "tools.routing",
		"store:\n  path: \"\"\n":                                         "store.path",
		"http:\n  listen: nowhere\n":                                     "http.listen",
		"log:\n  level: loud\n":                                          "log.level",
		"telegram:\n  enabled: true\n":                                   "telegram.token",
		"telegram:\n  enabled: true\n  token: t\n  mode: push\n":         "telegram.mode",
		"slack:\n  enabled: true\n  bot_token: bad\n":                    "slack.bot_token",
		"slack:\n  enabled: true\n  bot_token: xoxb-1\n  mode: events\n": "slack.signing_secret",
		"telegram:\n  enabled: yes please\n":                             "telegram.enabled",
	}
	for in, key := range cases {
		_, err := parseConfig([]byte(in), env(nil))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", in, err, key)
		}
	}
}

func TestEnvExpansion(t *testing.T) {
	raw := "llm:\n  api_key: ${KEY}\n  model: $NOT_EXPANDED\ntelegram:\n  allowed_users: [12345, \"@ana\"]\n"
	cfg, err := parseConfig([]byte(raw), env(map[string]string{"KEY": "sk-1", "NOT_EXPANDED": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKey != "sk-1" || cfg.LLM.Model != "$NOT_EXPANDED" {
		t.Errorf("expansion: %+v", cfg.LLM)
	}
	if len(cfg.Telegram.AllowedUsers) != 2 || cfg.Telegram.AllowedUsers[0] != "12345" {
		t.Errorf("allowed_users = %v", cfg.Telegram.AllowedUsers)
	}
	_, err = parseConfig([]byte("telegram:\n  enabled: true\n  token: ${TG}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "telegram.token") || !strings.Contains(err.Error(), "TG") {
		t.Errorf("unset variable not reported: %v", err)
	}
}

func TestConfigPathPrecedence(t *testing.T) {
	if p := configPath("a.yaml", env(map[string]string{"LOADOUT_CONFIG": "b.yaml"})); p != "a.yaml" {
		t.Error("flag should win")
	}
	if p := configPath("", env(map[string]string{"LOADOUT_CONFIG": "b.yaml"})); p != "b.yaml" {
		t.Error("LOADOUT_CONFIG should be used")
	}
	if p := configPath("", env(nil)); p != "config.yaml" {
		t.Error("default should be ./config.yaml")
	}
	_, err := loadConfig(filepath.Join(t.TempDir(), "missing.yaml"), env(nil))
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file error = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
