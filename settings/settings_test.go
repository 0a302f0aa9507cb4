package settings

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/bridge/slack"
	"loadout/bridge/telegram"
	"loadout/chat/openai"
	"loadout/config"

	"gopkg.in/yaml.v3"
)

func TestSampleConfigLoads(t *testing.T) {
	cfg, err := Load("../config.yaml", env(map[string]string{"OPENAI_API_KEY": "sk-test"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKey != "sk-test" || cfg.LLM.Engine.MaxToolRounds != 20 || cfg.Store.Path != "data/loadout.db" ||
		cfg.Tools.Routing != "groups" || cfg.HTTP.Listen != "127.0.0.1:8080" || cfg.LLM.Timeout != 120*time.Second {
		t.Fatalf("sample config = %+v", cfg)
	}
	if err := cfg.RequireLLM(); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyConfigGivesDefaults(t *testing.T) {
	cfg, err := Parse([]byte(""), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	// Left out, a package knob is zero: the package's own default applies.
	if cfg.LLM.BaseURL != "" || cfg.Section(telegram.Kind()).(telegram.Config).APIEndpoint != "" || cfg.LLM.Engine.MaxToolRounds != 0 {
		t.Fatalf("defaults = %+v", cfg)
	}
	if cfg.Model() != openai.DefaultModel || cfg.Store.Path != "data/loadout.db" || cfg.HTTP.Listen != "127.0.0.1:8080" {
		t.Fatalf("own defaults = %+v", cfg)
	}
	err = cfg.RequireLLM()
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
		"tools:\n  custom_secrets: {BAD-NAME: []}\n":                     "tools.custom_secrets",
		"tools:\n  custom_secrets: {KEY: [\"https://x\"]}\n":             "tools.custom_secrets.KEY",
	}
	for in, key := range cases {
		_, err := Parse([]byte(in), env(nil))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", in, err, key)
		}
	}
}

func TestEnvExpansion(t *testing.T) {
	raw := "llm:\n  api_key: ${KEY}\n  model: $NOT_EXPANDED\ntelegram:\n  allowed_users: [12345, \"@ana\"]\n"
	cfg, err := Parse([]byte(raw), env(map[string]string{"KEY": "sk-1", "NOT_EXPANDED": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKey != "sk-1" || cfg.LLM.Engine.Model != "$NOT_EXPANDED" {
		t.Errorf("expansion: %+v", cfg.LLM)
	}
	if tg := cfg.Section(telegram.Kind()).(telegram.Config); len(tg.AllowedUsers) != 2 || tg.AllowedUsers[0] != "12345" {
		t.Errorf("allowed_users = %v", tg.AllowedUsers)
	}
	_, err = Parse([]byte("telegram:\n  enabled: true\n  token: ${TG}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "telegram.token") || !strings.Contains(err.Error(), "TG") {
		t.Errorf("unset variable not reported: %v", err)
	}
}

func TestConfigPathPrecedence(t *testing.T) {
	if p := Path("a.yaml", env(map[string]string{"LOADOUT_CONFIG": "b.yaml"})); p != "a.yaml" {
		t.Error("flag should win")
	}
	if p := Path("", env(map[string]string{"LOADOUT_CONFIG": "b.yaml"})); p != "b.yaml" {
		t.Error("LOADOUT_CONFIG should be used")
	}
	if p := Path("", env(nil)); p != "config.yaml" {
		t.Error("default should be ./config.yaml")
	}
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), env(nil))
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

func TestUnsetVariableIsAnErrorNamingKeyAndVariable(t *testing.T) {
	_, err := Parse([]byte("llm:\n  base_url: ${OPENAI_BASE_URL}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "llm.base_url") || !strings.Contains(err.Error(), "OPENAI_BASE_URL") {
		t.Fatalf("err = %v, want one naming llm.base_url and OPENAI_BASE_URL", err)
	}
	_, err = Parse([]byte("telegram:\n  allowed_users: [\"1\", \"${SECOND}\"]\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "telegram.allowed_users[1]") {
		t.Fatalf("err = %v, want one naming telegram.allowed_users[1]", err)
	}
}

func TestVariablesWithDefaultsAndLiteralSecrets(t *testing.T) {
	raw := "llm:\n  api_key: ${KEY}\n  model: ${MODEL:-small}\n  base_url: ${URL:-http://127.0.0.1:11434/v1}\n" +
		"  max_tool_rounds: ${ROUNDS}\nslack:\n  signing_secret: \"${SIGN}\"\n  bot_token: '${BOT:-}'\n"
	cfg, err := Parse([]byte(raw), env(map[string]string{
		"KEY": "sk-abc #def", "ROUNDS": "7", "SIGN": "*star: colon & ~",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if sl := cfg.Section(slack.Kind()).(slack.Config); cfg.LLM.APIKey != "sk-abc #def" || sl.SigningSecret != "*star: colon & ~" || sl.BotToken != "" {
		t.Errorf("secrets = %q, %q, %q; want them literally", cfg.LLM.APIKey, sl.SigningSecret, sl.BotToken)
	}
	if cfg.LLM.Engine.Model != "small" || cfg.LLM.BaseURL != "http://127.0.0.1:11434/v1" || cfg.LLM.Engine.MaxToolRounds != 7 {
		t.Errorf("defaults and numbers: %+v", cfg.LLM)
	}
	// A value that looks like YAML null or a number stays a string.
	cfg, err = Parse([]byte("llm:\n  api_key: ${KEY}\n"), env(map[string]string{"KEY": "null"}))
	if err != nil || cfg.LLM.APIKey != "null" {
		t.Errorf("api_key = %q, %v", cfg.LLM.APIKey, err)
	}
}

func TestEveryKeyCanComeFromTheEnvironment(t *testing.T) {
	cfg, err := Parse([]byte("llm:\n  model: from-file\n"), env(map[string]string{
		"LOADOUT_LLM_MODEL":              "from-env",
		"LOADOUT_LLM_BASE_URL":           "http://127.0.0.1:8000/v1",
		"LOADOUT_LLM_MAX_TOOL_CALLS":     "8",
		"LOADOUT_HTTP_SHUTDOWN_GRACE":    "5s",
		"LOADOUT_TELEGRAM_ENABLED":       "true",
		"LOADOUT_TELEGRAM_TOKEN":         "123:abc",
		"LOADOUT_TELEGRAM_ALLOWED_USERS": "1, 2,,@ana",
		"LOADOUT_AGENT_SYSTEM_PROMPT":    "Be brief: always # literally",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Engine.Model != "from-env" || cfg.LLM.BaseURL != "http://127.0.0.1:8000/v1" || cfg.LLM.Engine.MaxToolCalls != 8 ||
		cfg.HTTP.ShutdownGrace.Std() != 5*time.Second || !cfg.Section(telegram.Kind()).(telegram.Config).Enabled || cfg.Section(telegram.Kind()).(telegram.Config).Token != "123:abc" ||
		!slices.Equal(cfg.Section(telegram.Kind()).(telegram.Config).AllowedUsers, []string{"1", "2", "@ana"}) || cfg.Agent.SystemPrompt != "Be brief: always # literally" {
		t.Fatalf("environment not applied: %+v", cfg)
	}
	for name, key := range map[string]string{
		"LOADOUT_LLM_ATTEMPTS":        "llm.attempts",
		"LOADOUT_SLACK_ENABLED":       "slack.enabled",
		"LOADOUT_HTTP_SHUTDOWN_GRACE": "http.shutdown_grace",
	} {
		_, err := Parse(nil, env(map[string]string{name: "many"}))
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=many: err = %v, want one naming %s and the variable", name, err, key)
		}
	}
}

func TestUnknownKeyListsOnlyRealKeys(t *testing.T) {
	_, err := Parse([]byte("google:\n  bogus: 1\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), `"google.bogus"`) || strings.Contains(err.Error(), "here: ,") ||
		!strings.Contains(err.Error(), "known keys here: auth_url, client_id,") {
		t.Fatalf("err = %v", err)
	}
}

// Every package knob an operator may need has a key, read into the
// package's own Config (whose zero values are its defaults).
func TestPackageKnobsHaveKeys(t *testing.T) {
	raw := `llm:
  backoff: 2s
  max_backoff: 20s
  history_messages: 300
  cached_sessions: -1
  repeat_limit: 5
telegram:
  poll_timeout: 50s
  typing_interval: 5s
  max_backoff: 2m
slack:
  attempts: 3
  backoff: 500ms
  chunk_size: 2000
google:
  auth_url: https://idp.example.org/auth
  token_url: https://idp.example.org/token
  revoke_url: https://idp.example.org/revoke
`
	cfg, err := Parse([]byte(raw), env(map[string]string{"LOADOUT_TELEGRAM_WORKERS": "3", "LOADOUT_SLACK_ALLOWED_CHANNELS": "C1,C2"}))
	if err != nil {
		t.Fatal(err)
	}
	e, tg, sl := cfg.LLM.Engine, cfg.Section(telegram.Kind()).(telegram.Config), cfg.Section(slack.Kind()).(slack.Config)
	if cfg.LLM.Backoff != 2*time.Second || cfg.LLM.MaxBackoff != 20*time.Second || e.HistoryMessages != 300 || e.CachedSessions != -1 || e.RepeatLimit != 5 ||
		tg.PollTimeout != 50*time.Second || tg.TypingInterval != 5*time.Second || tg.MaxBackoff != 2*time.Minute || tg.Workers != 3 ||
		sl.Attempts != 3 || sl.Backoff != 500*time.Millisecond || sl.ChunkSize != 2000 || !slices.Equal(sl.AllowedChannels, []string{"C1", "C2"}) ||
		cfg.Google.AuthURL != "https://idp.example.org/auth" || cfg.Google.TokenURL != "https://idp.example.org/token" || cfg.Google.RevokeURL != "https://idp.example.org/revoke" {
		t.Fatalf("knobs = %+v", cfg)
	}
	for in, key := range map[string]string{
		"llm:\n  history_messages: 1\n":                                "llm.history_messages",
		"llm:\n  repeat_limit: 0\n":                                    "llm.repeat_limit",
		"llm:\n  backoff: -1s\n":                                       "llm.backoff",
		"telegram:\n  enabled: true\n  token: t\n  poll_timeout: 0s\n": "telegram.poll_timeout",
		"slack:\n  enabled: true\n  bot_token: xoxb-1\n  app_token: xapp-1\n  chunk_size: 5\n": "slack.chunk_size",
		"telegram:\n  shutdown_grace: 1s\n":                                                    `"telegram.shutdown_grace"`,
	} {
		if _, err := Parse([]byte(in), env(nil)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", in, err, key)
		}
	}
}

// The sample config.yaml shows every key the code has, and no other (a
// key the code does not know fails TestSampleConfigLoads).
func TestEveryKeyIsInTheSample(t *testing.T) {
	sample := sampleKeys(t)
	inSample := map[string]bool{}
	for _, k := range sample {
		inSample[k.key] = true
	}
	for _, k := range codeKeys() {
		if !inSample[k] {
			t.Errorf("config.yaml lacks %s", k)
		}
	}
}

var updateDocs = flag.Bool("update-docs", false, "TestConfigurationDocListsEveryKey: rewrite the key list of docs/configuration.md")

// docs/configuration.md ends with every key, its default and what it
// does, generated from config.yaml: a key the code has and the page
// lacks, or the reverse, fails here (go test ./cmd/loadout -run
// TestConfigurationDocListsEveryKey -update-docs rewrites the list).
func TestConfigurationDocListsEveryKey(t *testing.T) {
	const path = "../docs/configuration.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	const begin = "<!-- every key: generated from config.yaml by TestConfigurationDocListsEveryKey -->"
	const end = "<!-- end of every key -->"
	var b strings.Builder
	b.WriteString(begin + "\n## Every key\n\nThe defaults are those of the sample `config.yaml`; a key left out of a file takes them.\n")
	section := ""
	for _, k := range sampleKeys(t) {
		if top, _, _ := strings.Cut(k.key, "."); top != section {
			section = top
			fmt.Fprintf(&b, "\n### %s\n\n| key | default | meaning |\n|---|---|---|\n", section)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k.key, k.def, strings.ReplaceAll(k.meaning, "|", "\\|"))
	}
	b.WriteString(end)
	want := b.String()
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if *updateDocs {
		if i < 0 || j < i {
			doc = strings.TrimRight(doc, "\n") + "\n\n" + want + "\n"
		} else {
			doc = doc[:i] + want + doc[j+len(end):]
		}
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if i < 0 || j < i || doc[i:j+len(end)] != want {
		t.Fatalf("%s: its key list is not config.yaml's; run go test ./cmd/loadout -run TestConfigurationDocListsEveryKey -update-docs", path)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(doc[i:j], "\n") {
		if k, ok := strings.CutPrefix(line, "| `"); ok {
			k, _, _ = strings.Cut(k, "`")
			listed[k] = true
		}
	}
	code := map[string]bool{}
	for _, k := range codeKeys() {
		code[k] = true
		if !listed[k] {
			t.Errorf("%s does not list %s", path, k)
		}
	}
	for k := range listed {
		if !code[k] {
			t.Errorf("%s lists %s, which is no key", path, k)
		}
	}
}

// codeKeys are the config's leaf keys, as the code declares them.
func codeKeys() []string {
	return config.Keys(ChannelKinds().File(reflect.TypeFor[Config]()))
}

type sampleKey struct{ key, def, meaning string }

// sampleKeys are config.yaml's leaf keys in order, each with its value
// and its comment.
func sampleKeys(t *testing.T) []sampleKey {
	t.Helper()
	raw, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	var out []sampleKey
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := config.JoinKey(prefix, k.Value)
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
				walk(v, key)
				continue
			}
			def := v.Value
			switch {
			case v.Kind != yaml.ScalarNode:
				bare := *v
				bare.HeadComment, bare.LineComment, bare.FootComment = "", "", ""
				b, _ := yaml.Marshal(&bare)
				def = strings.TrimSpace(string(b))
			case def == "":
				def = `""`
			}
			meaning := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v.LineComment+k.LineComment), "#"))
			out = append(out, sampleKey{key: key, def: "`" + def + "`", meaning: meaning})
		}
	}
	walk(root.Content[0], "")
	return out
}

func TestMCPServersConfig(t *testing.T) {
	_, err := Parse([]byte("mcp:\n  servers:\n    - name: gh\n      comand: x\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), `"mcp.servers[0].comand"`) {
		t.Fatalf("misspelt key: %v", err)
	}
	_, err = Parse([]byte("mcp:\n  servers:\n    - name: gh\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "mcp.servers[0].command: give either command") {
		t.Fatalf("no command or url: %v", err)
	}
	_, err = Parse([]byte("mcp:\n  servers:\n    - name: gh\n      url: https://h/mcp\n      headers:\n        Authorization: Bearer ${GH}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "mcp.servers[0].headers.Authorization") || !strings.Contains(err.Error(), "GH is not set") {
		t.Fatalf("unset variable in a header: %v", err)
	}
	cfg, err := Parse([]byte("mcp:\n  servers:\n    - name: gh\n      url: https://h/mcp\n      timeout: 5s\n      headers:\n        Authorization: Bearer ${GH}\n"), env(map[string]string{"GH": "t0k"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.MCP.Servers[0]; s.Headers["Authorization"] != "Bearer t0k" || s.Timeout != 5*time.Second {
		t.Fatalf("server = %+v", s)
	}
}

// A negative number of PDF workers or commands is refused by its key's name.
func TestPDFMaxWorkersIsChecked(t *testing.T) {
	if _, err := Parse([]byte("pdf:\n  max_workers: -1\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "pdf.max_workers: must be 1 or more") {
		t.Fatalf("pdf.max_workers: -1: %v", err)
	}
	if _, err := Parse([]byte("exec:\n  max_running: -2\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "exec.max_running: must be 1 or more") {
		t.Fatalf("exec.max_running: -2: %v", err)
	}
	cfg, err := Parse([]byte("pdf:\n  max_workers: 3\n"), env(nil))
	if err != nil || cfg.PDF.MaxWorkers != 3 {
		t.Fatalf("pdf.max_workers: 3: %v %+v", err, cfg.PDF)
	}
}

func TestStoreDriverConfig(t *testing.T) {
	if _, err := Parse([]byte("store:\n  driver: mysql\n"), env(nil)); err == nil || !strings.Contains(err.Error(), `store.driver: must be "sqlite" or "postgres"`) {
		t.Fatalf("unknown driver: %v", err)
	}
	if _, err := Parse([]byte("store:\n  driver: postgres\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "store.dsn: must be set") {
		t.Fatalf("no dsn: %v", err)
	}
	cfg, err := Parse([]byte("store:\n  driver: postgres\n  dsn: ${DB_URL}\n"), env(map[string]string{"DB_URL": "postgres://u@h/db"}))
	if err != nil || cfg.Store.DSN != "postgres://u@h/db" {
		t.Fatalf("dsn from the environment: %+v, %v", cfg.Store, err)
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
