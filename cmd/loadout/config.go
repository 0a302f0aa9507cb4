package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is config.yaml. Zero values are replaced by the defaults in
// defaults(); every key is documented in the sample config.yaml.
type Config struct {
	Agent    AgentConfig    `yaml:"agent"`
	LLM      LLMConfig      `yaml:"llm"`
	Store    StoreConfig    `yaml:"store"`
	Tools    ToolsConfig    `yaml:"tools"`
	HTTP     HTTPConfig     `yaml:"http"`
	Log      LogConfig      `yaml:"log"`
	Console  ConsoleConfig  `yaml:"console"`
	Telegram TelegramConfig `yaml:"telegram"`
	Slack    SlackConfig    `yaml:"slack"`
	Google   GoogleConfig   `yaml:"google"`
}

// AgentConfig is the assistant's identity.
type AgentConfig struct {
	Name         string `yaml:"name"`
	SystemPrompt string `yaml:"system_prompt"`
}

// LLMConfig is the OpenAI-compatible model service.
type LLMConfig struct {
	BaseURL         string   `yaml:"base_url"`
	APIKey          string   `yaml:"api_key"`
	Model           string   `yaml:"model"`
	MaxToolRounds   int      `yaml:"max_tool_rounds"`
	MaxToolCalls    int      `yaml:"max_tool_calls"`
	Timeout         Duration `yaml:"timeout"`
	Attempts        int      `yaml:"attempts"`
	HistoryTokens   int      `yaml:"history_tokens"`
	ToolResultChars int      `yaml:"tool_result_chars"`
}

// StoreConfig is the SQLite file.
type StoreConfig struct {
	Path string `yaml:"path"`
}

// ToolsConfig controls which schemas the model sees.
type ToolsConfig struct {
	Routing string `yaml:"routing"`
	// ManifestsDir holds JSON tool manifests, one group per file.
	ManifestsDir string `yaml:"manifests_dir"`
}

// HTTPConfig is the HTTP server: health, webhooks, OAuth callbacks.
type HTTPConfig struct {
	Listen string `yaml:"listen"`
	// ShutdownGrace is how long in-flight turns may run after a stop signal.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// Metrics serves Prometheus metrics at /metrics.
	Metrics bool `yaml:"metrics"`
}

// LogConfig controls logging.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// ConsoleConfig is the terminal channel of `loadout chat`.
type ConsoleConfig struct {
	// User is the chat key suffix: the session is "console:<user>".
	User string `yaml:"user"`
}

// TelegramConfig is the Telegram channel.
type TelegramConfig struct {
	Enabled       bool     `yaml:"enabled"`
	Token         string   `yaml:"token"`
	APIEndpoint   string   `yaml:"api_endpoint"`
	AllowedUsers  []string `yaml:"allowed_users"`
	Mode          string   `yaml:"mode"`
	WebhookURL    string   `yaml:"webhook_url"`
	WebhookSecret string   `yaml:"webhook_secret"`
	Workers       int      `yaml:"workers"`
}

// SlackConfig is the Slack channel.
type SlackConfig struct {
	Enabled         bool     `yaml:"enabled"`
	BotToken        string   `yaml:"bot_token"`
	AppToken        string   `yaml:"app_token"`
	SigningSecret   string   `yaml:"signing_secret"`
	Mode            string   `yaml:"mode"`
	APIURL          string   `yaml:"api_url"`
	AllowedUsers    []string `yaml:"allowed_users"`
	AllowedChannels []string `yaml:"allowed_channels"`
	Workers         int      `yaml:"workers"`
}

// GoogleConfig is Google Workspace access.
type GoogleConfig struct {
	ClientID        string `yaml:"client_id"`
	ClientSecret    string `yaml:"client_secret"`
	CredentialsFile string `yaml:"credentials_file"`
	RedirectURL     string `yaml:"redirect_url"`
	TokenKey        string `yaml:"token_key"`
	Endpoint        string `yaml:"endpoint"`

	// listAll registers the Google groups even when Google is not set up,
	// so `loadout tools` can show their cost.
	listAll bool
	// authURL, tokenURL and revokeURL override Google's OAuth endpoints
	// (tests only; empty means Google's).
	authURL, tokenURL, revokeURL string
}

// Duration is a time.Duration written as "30s" or "2m" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration like 30s or 2m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Std returns the value as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

func defaults() Config {
	return Config{
		Agent: AgentConfig{
			Name:         "loadout",
			SystemPrompt: "You are a helpful personal assistant. Answer briefly and plainly. Use tools when they help; load a tool group before using its tools.",
		},
		LLM: LLMConfig{
			BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini", MaxToolRounds: 20, MaxToolCalls: 32,
			Timeout: Duration(120 * time.Second), Attempts: 4, HistoryTokens: 16000, ToolResultChars: 2000,
		},
		Store:    StoreConfig{Path: "data/loadout.db"},
		Tools:    ToolsConfig{Routing: "groups"},
		HTTP:     HTTPConfig{Listen: "127.0.0.1:8080", ShutdownGrace: Duration(30 * time.Second), Metrics: true},
		Log:      LogConfig{Level: "info", Format: "text"},
		Console:  ConsoleConfig{User: "local"},
		Telegram: TelegramConfig{APIEndpoint: "https://api.telegram.org/bot%s/%s", Mode: "polling", Workers: 8},
		Slack:    SlackConfig{Mode: "socket", APIURL: "https://slack.com/api/", Workers: 8},
	}
}

// configPath picks the file: the -config flag, else LOADOUT_CONFIG, else
// ./config.yaml.
func configPath(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	if p := getenv("LOADOUT_CONFIG"); p != "" {
		return p
	}
	return "config.yaml"
}

// loadConfig reads, expands and checks a config file. Every error names
// the offending key.
func loadConfig(path string, getenv func(string) string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return parseConfig(raw, getenv)
}

func parseConfig(raw []byte, getenv func(string) string) (Config, error) {
	cfg := defaults()
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if len(root.Content) > 0 {
		doc := root.Content[0]
		lines := map[int]string{}
		if err := checkKeys(doc, reflect.TypeOf(cfg), "", lines); err != nil {
			return Config{}, err
		}
		if err := expandNode(doc, reflect.TypeOf(cfg), "", getenv); err != nil {
			return Config{}, err
		}
		if err := doc.Decode(&cfg); err != nil {
			return Config{}, fmt.Errorf("config: %s", nameLine(err, lines))
		}
	}
	if err := applyEnv(reflect.ValueOf(&cfg).Elem(), "", getenv); err != nil {
		return Config{}, err
	}
	return cfg, cfg.validate()
}

// envRef is ${VAR} or ${VAR:-default}.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandNode replaces ${VAR} and ${VAR:-default} in the scalar values
// under n, after YAML parsing: a value read from the environment is taken
// literally, whatever '#', ': ' or '*' it holds. A variable that is
// referenced without a default and not set is an error naming the key.
func expandNode(n *yaml.Node, t reflect.Type, key string, getenv func(string) string) error {
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() != reflect.Struct {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			f, ok := yamlField(t, n.Content[i].Value)
			if !ok {
				continue // checkKeys has refused it
			}
			if err := expandNode(n.Content[i+1], f.Type, joinKey(key, n.Content[i].Value), getenv); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return nil
		}
		for i, c := range n.Content {
			if err := expandNode(c, t.Elem(), fmt.Sprintf("%s[%d]", key, i), getenv); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		var missing string
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := envRef.FindStringSubmatch(m)
			if v := getenv(sub[1]); v != "" {
				return v
			}
			if sub[2] == "" && missing == "" {
				missing = sub[1]
			}
			return sub[3]
		})
		if missing != "" {
			return fmt.Errorf("config: %s (line %d): environment variable %s is not set (write ${%s:-} to allow it to be empty)",
				key, n.Line, missing, missing)
		}
		// A string takes the text as it is; other kinds are read from it.
		n.Style = 0
		n.Tag = ""
		if t.Kind() == reflect.String {
			n.Tag = "!!str"
		}
	}
	return nil
}

// applyEnv sets each key from LOADOUT_<KEY> when that variable is set: the
// dotted key in capitals with '_' for '.', e.g. LOADOUT_LLM_BASE_URL; a
// list is comma-separated. The environment wins over the file.
func applyEnv(v reflect.Value, key string, getenv func(string) string) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := yamlName(f)
		if name == "" {
			continue
		}
		k := joinKey(key, name)
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Struct {
			if err := applyEnv(fv, k, getenv); err != nil {
				return err
			}
			continue
		}
		envName := envVar(k)
		raw := getenv(envName)
		if raw == "" {
			continue
		}
		bad := func(want string) error {
			return fmt.Errorf("config: %s: %s is not %s", k, envName, want)
		}
		switch {
		case f.Type == reflect.TypeOf(Duration(0)):
			d, err := time.ParseDuration(strings.TrimSpace(raw))
			if err != nil || d < 0 {
				return bad("a duration like 30s or 2m")
			}
			fv.SetInt(int64(d))
		case f.Type.Kind() == reflect.String:
			fv.SetString(raw)
		case f.Type.Kind() == reflect.Int:
			n, err := strconv.Atoi(strings.TrimSpace(raw))
			if err != nil {
				return bad("a whole number")
			}
			fv.SetInt(int64(n))
		case f.Type.Kind() == reflect.Bool:
			b, err := strconv.ParseBool(strings.TrimSpace(raw))
			if err != nil {
				return bad("true or false")
			}
			fv.SetBool(b)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			var list []string
			for item := range strings.SplitSeq(raw, ",") {
				if item = strings.TrimSpace(item); item != "" {
					list = append(list, item)
				}
			}
			fv.Set(reflect.ValueOf(list))
		}
	}
	return nil
}

// envVar is the variable that sets a dotted key.
func envVar(key string) string {
	return "LOADOUT_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// yamlName is a field's key, "" for fields that are not config keys.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); name != "" && yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// checkKeys walks the YAML mapping against the struct type and reports the
// first unknown key with its full dotted name. It records which key sits on
// each line so decode errors can name keys too.
func checkKeys(n *yaml.Node, t reflect.Type, prefix string, lines map[int]string) error {
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); yamlName(f) != "" {
			fields[yamlName(f)] = f
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := joinKey(prefix, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			sort.Strings(known)
			return fmt.Errorf("config: unknown key %q (line %d); known keys here: %s", key, k.Line, strings.Join(known, ", "))
		}
		lines[v.Line] = key
		if err := checkKeys(v, f.Type, key, lines); err != nil {
			return err
		}
	}
	return nil
}

var lineRef = regexp.MustCompile(`line (\d+): `)

// nameLine rewrites yaml's "line N: …" into "key (line N): …".
func nameLine(err error, lines map[int]string) string {
	return lineRef.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(lineRef.FindStringSubmatch(m)[1])
		if key, ok := lines[n]; ok {
			return fmt.Sprintf("%s (line %d): ", key, n)
		}
		return m
	})
}

// validate checks values that decode fine but make no sense.
func (c Config) validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, a...)))
	}
	if c.LLM.MaxToolRounds < 1 {
		bad("llm.max_tool_rounds", "must be at least 1, got %d", c.LLM.MaxToolRounds)
	}
	if c.LLM.MaxToolCalls < 1 {
		bad("llm.max_tool_calls", "must be at least 1, got %d", c.LLM.MaxToolCalls)
	}
	if c.LLM.Attempts < 1 {
		bad("llm.attempts", "must be at least 1, got %d", c.LLM.Attempts)
	}
	if c.LLM.Timeout.Std() < time.Second {
		bad("llm.timeout", "must be at least 1s, got %s", c.LLM.Timeout.Std())
	}
	if c.LLM.HistoryTokens < 1000 {
		bad("llm.history_tokens", "must be at least 1000, got %d", c.LLM.HistoryTokens)
	}
	if c.LLM.ToolResultChars < 100 {
		bad("llm.tool_result_chars", "must be at least 100, got %d", c.LLM.ToolResultChars)
	}
	if u, err := url.Parse(c.LLM.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("llm.base_url", "must be an http(s) URL, got %q", c.LLM.BaseURL)
	}
	if c.Store.Path == "" {
		bad("store.path", "must not be empty")
	}
	if c.Tools.Routing != "groups" && c.Tools.Routing != "all" {
		bad("tools.routing", `must be "groups" or "all", got %q`, c.Tools.Routing)
	}
	if c.Tools.ManifestsDir != "" {
		if st, err := os.Stat(c.Tools.ManifestsDir); err != nil || !st.IsDir() {
			bad("tools.manifests_dir", "%q is not a readable directory", c.Tools.ManifestsDir)
		}
	}
	if c.HTTP.Listen == "" || !strings.Contains(c.HTTP.Listen, ":") {
		bad("http.listen", "must be host:port, got %q", c.HTTP.Listen)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", `must be "text" or "json", got %q`, c.Log.Format)
	}
	if c.Console.User == "" {
		bad("console.user", "must not be empty")
	}
	if c.Telegram.Enabled {
		if c.Telegram.Token == "" {
			bad("telegram.token", "is required when telegram.enabled is true")
		}
		if c.Telegram.Mode != "polling" && c.Telegram.Mode != "webhook" {
			bad("telegram.mode", `must be "polling" or "webhook", got %q`, c.Telegram.Mode)
		}
		if c.Telegram.Mode == "webhook" && (c.Telegram.WebhookURL == "" || c.Telegram.WebhookSecret == "") {
			bad("telegram.webhook_url", "and telegram.webhook_secret are required when telegram.mode is webhook")
		}
		if strings.Count(c.Telegram.APIEndpoint, "%s") != 2 {
			bad("telegram.api_endpoint", "must contain two %%s (token, method), got %q", c.Telegram.APIEndpoint)
		}
		if c.Telegram.Workers < 1 {
			bad("telegram.workers", "must be at least 1, got %d", c.Telegram.Workers)
		}
	}
	if c.Slack.Enabled {
		if !strings.HasPrefix(c.Slack.BotToken, "xoxb-") {
			bad("slack.bot_token", "must be a bot token starting with xoxb-")
		}
		switch c.Slack.Mode {
		case "socket":
			if !strings.HasPrefix(c.Slack.AppToken, "xapp-") {
				bad("slack.app_token", "must be an app-level token starting with xapp- when slack.mode is socket")
			}
		case "events":
			if c.Slack.SigningSecret == "" {
				bad("slack.signing_secret", "is required when slack.mode is events")
			}
		default:
			bad("slack.mode", `must be "socket" or "events", got %q`, c.Slack.Mode)
		}
		if c.Slack.Workers < 1 {
			bad("slack.workers", "must be at least 1, got %d", c.Slack.Workers)
		}
	}
	return errors.Join(errs...)
}

// requireLLM checks what talking to the model needs: OpenAI's service
// needs a key; a local server (Ollama, vLLM, LM Studio) usually needs none.
func (c Config) requireLLM() error {
	u, err := url.Parse(c.LLM.BaseURL)
	if strings.TrimSpace(c.LLM.APIKey) == "" && err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return errors.New("config: llm.api_key is empty and llm.base_url is OpenAI's: set the key (the sample reads ${OPENAI_API_KEY}), or point llm.base_url at a local server")
	}
	return nil
}
