package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/bridge/slack"
	"loadout/bridge/telegram"
	"loadout/chat"
	"loadout/chat/openai"
	"loadout/google/gmail"
	"loadout/store"
	"loadout/tools"
	"loadout/tools/files"
	"loadout/tools/guard"
	"loadout/tools/mcp"
	"loadout/tools/memory"
	"loadout/tools/pdf"
	"loadout/tools/schedule"
	"loadout/tools/shell"
	"loadout/tools/web"
	"loadout/voice"

	"gopkg.in/yaml.v3"
)

// Config is config.yaml. A key left out takes the default of the package
// that uses it (the package Configs below carry the yaml tags, so a knob a
// package has is a key, and its zero value means "the package default");
// defaults() holds only what this command owns. Every key is documented in
// the sample config.yaml and docs/configuration.md.
type Config struct {
	Agent     AgentConfig     `yaml:"agent"`
	LLM       LLMConfig       `yaml:"llm"`
	Store     StoreConfig     `yaml:"store"`
	Tools     ToolsConfig     `yaml:"tools"`
	Web       WebConfig       `yaml:"web"`
	Skills    SkillsConfig    `yaml:"skills"`
	Memory    memory.Config   `yaml:"memory"`
	Files     files.Config    `yaml:"files"`
	Exec      shell.Config    `yaml:"exec"`
	PDF       pdf.Config      `yaml:"pdf"`
	Scheduler schedule.Config `yaml:"scheduler"`
	MCP       mcp.Config      `yaml:"mcp"`
	Cluster   ClusterConfig   `yaml:"cluster"`
	HTTP      HTTPConfig      `yaml:"http"`
	Delivery  DeliveryConfig  `yaml:"delivery"`
	Log       LogConfig       `yaml:"log"`
	Console   ConsoleConfig   `yaml:"console"`
	Telegram  TelegramConfig  `yaml:"telegram"`
	Slack     SlackConfig     `yaml:"slack"`
	Google    GoogleConfig    `yaml:"google"`
	Voice     voice.Config    `yaml:"voice"`
}

// AgentConfig is the assistant's identity.
type AgentConfig struct {
	Name         string `yaml:"name"`
	SystemPrompt string `yaml:"system_prompt"`
	// TimeZone is the people's time zone unless a task says another.
	TimeZone string `yaml:"time_zone"`
}

// LLMConfig is the OpenAI-compatible model service and the engine's
// limits.
type LLMConfig struct {
	openai.Config `yaml:",inline"`
	Engine        chat.Config `yaml:",inline"`
	// Vision shows the model the pictures people send, as image input.
	Vision bool `yaml:"vision"`
}

// StoreConfig is the database: a SQLite file (the default) or a
// PostgreSQL server.
type StoreConfig struct {
	// Driver is "sqlite" (default) or "postgres".
	Driver string `yaml:"driver"`
	// Path is the SQLite file; with postgres, workspace files and the
	// console's history still go beside it.
	Path string `yaml:"path"`
	// DSN is the PostgreSQL connection URL.
	DSN string `yaml:"dsn"`
}

// open opens the configured database; an error names the key to fix.
func (c StoreConfig) open() (*store.DB, error) {
	if c.Driver == "postgres" {
		db, err := store.OpenPostgres(c.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w (store.dsn)", err)
		}
		return db, nil
	}
	db, err := store.Open(c.Path)
	if err != nil {
		return nil, fmt.Errorf("%w (store.path)", err)
	}
	return db, nil
}

// ToolsConfig controls which schemas the model sees.
type ToolsConfig struct {
	Routing string `yaml:"routing"`
	// CatalogBudget bounds, in tokens, the schemas of a session's loaded
	// groups; 0 is no bound.
	CatalogBudget int `yaml:"catalog_budget"`
	// ManifestsDir holds JSON tool manifests, one group per file.
	ManifestsDir string `yaml:"manifests_dir"`
	// Admins are the user keys that may create tools from a chat, and
	// change, run or delete what others own (scheduled tasks).
	Admins []string `yaml:"admins"`
	// CustomSecrets are the environment variables a tool made in a chat
	// may send in its headers, each bound to the hosts listed (an empty
	// list: the tool's own host, whatever it is).
	CustomSecrets map[string][]string `yaml:"custom_secrets"`
	// Confirm is which calls wait for the person's approval:
	// destructive (default), mutating or none; ConfirmTools overrides it
	// per tool (always or never); ConfirmTTL is how long a question waits.
	Confirm      string            `yaml:"confirm"`
	ConfirmTools map[string]string `yaml:"confirm_tools"`
	// ConfirmAfterUntrusted is what waits once a turn has read
	// untrusted content: mutating (default), destructive or off.
	ConfirmAfterUntrusted string   `yaml:"confirm_after_untrusted"`
	ConfirmTTL            Duration `yaml:"confirm_ttl"`
}

// WebConfig is the web tools: the guard's allowlist and the web
// package's own knobs.
type WebConfig struct {
	// AllowHosts lets intranet hosts, addresses and CIDR prefixes through
	// the guard that keeps the model's requests off private networks.
	AllowHosts []string `yaml:"allow_hosts"`
	web.Config `yaml:",inline"`
}

// SkillsConfig is where skills are read from.
type SkillsConfig struct {
	// Dir holds one folder per skill, each with a SKILL.md.
	Dir string `yaml:"dir"`
}

// DeliveryConfig is the delivery pipeline every channel's messages go
// through.
type DeliveryConfig struct {
	// MaxAttempts is how often a message's turn may start and never come
	// back (the process ended under it) before the message is set aside
	// as poison; default 3.
	MaxAttempts int `yaml:"max_attempts"`
	// ShutdownGrace is how long in-flight turns may run after a stop
	// signal, in every command (serve and chat); unset, the older
	// http.shutdown_grace, else 30s.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
}

// grace is the shutdown grace: delivery.shutdown_grace, else its older
// name http.shutdown_grace.
func (c Config) grace() time.Duration {
	if c.Delivery.ShutdownGrace > 0 {
		return c.Delivery.ShutdownGrace.Std()
	}
	return c.HTTP.ShutdownGrace.Std()
}

// HTTPConfig is the HTTP server: health, webhooks, OAuth callbacks.
type HTTPConfig struct {
	Listen string `yaml:"listen"`
	// ShutdownGrace is the older name of delivery.shutdown_grace, still
	// read when that is unset.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// Metrics serves Prometheus metrics at /metrics.
	Metrics bool `yaml:"metrics"`
	// Pprof serves Go's profiles at /debug/pprof/.
	Pprof bool `yaml:"pprof"`
}

// LogConfig controls logging.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// ConsoleConfig is the terminal channel of `loadout chat`.
type ConsoleConfig struct {
	// User is the chat key suffix: the session is "console:<user>";
	// the console's default is "local".
	User string `yaml:"user"`
	// Stream prints answers as the model writes them.
	Stream bool `yaml:"stream"`
}

// TelegramConfig is the Telegram channel: its switch and the channel's
// own settings.
type TelegramConfig struct {
	Enabled         bool `yaml:"enabled"`
	telegram.Config `yaml:",inline"`
}

// SlackConfig is the Slack channel: its switch and the channel's own
// settings.
type SlackConfig struct {
	Enabled      bool `yaml:"enabled"`
	slack.Config `yaml:",inline"`
}

// GoogleConfig is Google Workspace access.
type GoogleConfig struct {
	ClientID        string `yaml:"client_id"`
	ClientSecret    string `yaml:"client_secret"`
	CredentialsFile string `yaml:"credentials_file"`
	RedirectURL     string `yaml:"redirect_url"`
	TokenKey        string `yaml:"token_key"`
	Endpoint        string `yaml:"endpoint"`
	// AuthURL, TokenURL and RevokeURL are the OAuth endpoints; empty means
	// those of google.credentials_file, else Google's.
	AuthURL   string `yaml:"auth_url"`
	TokenURL  string `yaml:"token_url"`
	RevokeURL string `yaml:"revoke_url"`
	// Groups are the Workspace groups offered; empty means all. Consent
	// asks only for their scopes.
	Groups []string `yaml:"groups"`
	// Gmail is the Gmail group's own settings.
	Gmail GmailConfig `yaml:"gmail"`
}

// GmailConfig is the Gmail group's settings.
type GmailConfig struct {
	// Send is "send" (the default) or "draft": sends and replies become
	// drafts the person sends from Gmail.
	Send string `yaml:"send"`
}

// ClusterConfig is how processes sharing a database split the duties only
// one may perform.
type ClusterConfig struct {
	// Lease is how long a duty's lease lasts unless renewed: how soon
	// another process takes over a dead one's duty.
	Lease Duration `yaml:"lease"`
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
		Store: StoreConfig{Path: "data/loadout.db"},
		HTTP:  HTTPConfig{Listen: "127.0.0.1:8080", ShutdownGrace: Duration(bridge.DefaultShutdownGrace), Metrics: true},
		Log:   LogConfig{Level: "info", Format: "text"},
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
	set := map[string]bool{} // keys the file or the environment gave
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if len(root.Content) > 0 {
		doc := root.Content[0]
		lines := map[int]string{}
		if err := checkKeys(doc, reflect.TypeOf(cfg), "", lines, set); err != nil {
			return Config{}, err
		}
		if err := expandNode(doc, reflect.TypeOf(cfg), "", getenv); err != nil {
			return Config{}, err
		}
		if err := doc.Decode(&cfg); err != nil {
			return Config{}, fmt.Errorf("config: %s", nameLine(err, lines))
		}
	}
	if err := applyEnv(reflect.ValueOf(&cfg).Elem(), "", getenv, set); err != nil {
		return Config{}, err
	}
	if cfg.Google.TokenKey == "" {
		// The name the key had before every key got its LOADOUT_ variable.
		cfg.Google.TokenKey = getenv("LOADOUT_TOKEN_KEY")
	}
	return cfg, cfg.validate(set)
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
		if t.Kind() == reflect.Map {
			// Values of a map (an MCP server's env and headers).
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := expandNode(n.Content[i+1], t.Elem(), joinKey(key, n.Content[i].Value), getenv); err != nil {
					return err
				}
			}
			return nil
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			f, ok := yamlField(t, n.Content[i].Value)
			if !ok {
				continue // checkKeys has refused it
			}
			if err := expandNode(n.Content[i+1], f.typ, joinKey(key, n.Content[i].Value), getenv); err != nil {
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
func applyEnv(v reflect.Value, key string, getenv func(string) string, set map[string]bool) error {
	for _, f := range keyFields(v.Type()) {
		k := joinKey(key, f.name)
		fv := v.FieldByIndex(f.index)
		if f.typ.Kind() == reflect.Struct {
			if err := applyEnv(fv, k, getenv, set); err != nil {
				return err
			}
			continue
		}
		envName := envVar(k)
		raw := getenv(envName)
		if raw == "" {
			continue
		}
		set[k] = true
		bad := func(want string) error {
			return fmt.Errorf("config: %s: %s is not %s", k, envName, want)
		}
		switch t := f.typ; {
		case t == reflect.TypeOf(Duration(0)) || t == reflect.TypeOf(time.Duration(0)):
			d, err := time.ParseDuration(strings.TrimSpace(raw))
			if err != nil || d < 0 {
				return bad("a duration like 30s or 2m")
			}
			fv.SetInt(int64(d))
		case t.Kind() == reflect.String:
			fv.SetString(raw)
		case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
			n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
			if err != nil {
				return bad("a whole number")
			}
			fv.SetInt(n)
		case t.Kind() == reflect.Float64:
			x, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return bad("a number")
			}
			fv.SetFloat(x)
		case t.Kind() == reflect.Bool, t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Bool:
			b, err := strconv.ParseBool(strings.TrimSpace(raw))
			if err != nil {
				return bad("true or false")
			}
			if t.Kind() == reflect.Pointer {
				fv.Set(reflect.ValueOf(&b))
			} else {
				fv.SetBool(b)
			}
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
			var list []string
			for item := range strings.SplitSeq(raw, ",") {
				if item = strings.TrimSpace(item); item != "" {
					list = append(list, item)
				}
			}
			fv.Set(reflect.ValueOf(list))
		default:
			return fmt.Errorf("config: %s cannot be set from the environment (%s)", k, t)
		}
	}
	return nil
}

// envVar is the variable that sets a dotted key.
// envName is the form of an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func envVar(key string) string {
	return "LOADOUT_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// keyField is one config key of a struct: its name, where it sits (inside
// inlined structs) and its type.
type keyField struct {
	name  string
	index []int
	typ   reflect.Type
}

// keyFields lists the keys of struct type t, with the keys of inlined
// fields (`yaml:",inline"`) in place. Unexported fields and `yaml:"-"` are
// not keys.
func keyFields(t reflect.Type) []keyField {
	var out []keyField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			for _, in := range keyFields(f.Type) {
				in.index = append([]int{i}, in.index...)
				out = append(out, in)
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out = append(out, keyField{name: name, index: []int{i}, typ: f.Type})
	}
	return out
}

func yamlField(t reflect.Type, name string) (keyField, bool) {
	for _, f := range keyFields(t) {
		if f.name == name {
			return f, true
		}
	}
	return keyField{}, false
}

// checkKeys walks the YAML mapping against the struct type and reports the
// first unknown key with its full dotted name. It records which key sits on
// each line so decode errors can name keys too.
func checkKeys(n *yaml.Node, t reflect.Type, prefix string, lines map[int]string, set map[string]bool) error {
	if n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice {
		// A list of sections (mcp.servers) is checked item by item.
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", prefix, i), lines, map[string]bool{}); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]keyField{}
	for _, f := range keyFields(t) {
		fields[f.name] = f
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
		set[key] = true
		if err := checkKeys(v, f.typ, key, lines, set); err != nil {
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

// validate checks values that decode fine but make no sense. set holds
// the keys the file or the environment gave: a knob left out takes its
// package's default, one given must be usable.
func (c Config) validate(set map[string]bool) error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, a...)))
	}
	atLeast := func(key string, v, min int) {
		if (set[key] || v != 0) && v < min {
			bad(key, "must be at least %d, got %d", min, v)
		}
	}
	duration := func(key string, v, min time.Duration) {
		if (set[key] || v != 0) && v < min {
			bad(key, "must be at least %s, got %s", min, v)
		}
	}
	e := c.LLM.Engine
	atLeast("llm.max_tool_rounds", e.MaxToolRounds, 1)
	atLeast("llm.max_tool_calls", e.MaxToolCalls, 1)
	atLeast("llm.history_tokens", e.HistoryTokens, 1000)
	atLeast("llm.history_messages", e.HistoryMessages, 10)
	atLeast("llm.tool_result_chars", e.ToolResultChars, 100)
	atLeast("llm.tool_result_max_chars", e.ToolResultMaxChars, 1000)
	if set["llm.cached_sessions"] && e.CachedSessions < -1 {
		bad("llm.cached_sessions", "must be -1 (no cache) or more, got %d", e.CachedSessions)
	}
	atLeast("llm.repeat_limit", e.RepeatLimit, 1)
	atLeast("llm.attempts", c.LLM.Attempts, 1)
	duration("llm.timeout", c.LLM.Timeout, time.Second)
	duration("llm.backoff", c.LLM.Backoff, time.Millisecond)
	duration("llm.max_backoff", c.LLM.MaxBackoff, time.Millisecond)
	if c.LLM.BaseURL != "" {
		if u, err := url.Parse(c.LLM.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("llm.base_url", "must be an http(s) URL, got %q", c.LLM.BaseURL)
		}
	}
	if c.Store.Path == "" {
		bad("store.path", "must not be empty")
	}
	switch c.Store.Driver {
	case "", "sqlite":
	case "postgres":
		if c.Store.DSN == "" {
			bad("store.dsn", "must be set with store.driver postgres, e.g. postgres://loadout@127.0.0.1:5432/loadout")
		}
	default:
		bad("store.driver", `must be "sqlite" or "postgres", got %q`, c.Store.Driver)
	}
	if c.Tools.Routing != "" && c.Tools.Routing != chat.RoutingGroups && c.Tools.Routing != chat.RoutingAll {
		bad("tools.routing", `must be "groups" or "all", got %q`, c.Tools.Routing)
	}
	errs = append(errs, c.MCP.Check()...)
	errs = append(errs, c.Voice.Check()...)
	for _, g := range c.Google.Groups {
		if !slices.Contains(googleGroupNames(), g) {
			bad("google.groups", "%q is not a Workspace group; known: %s", g, strings.Join(googleGroupNames(), ", "))
		}
	}
	if s := c.Google.Gmail.Send; s != "" && s != gmail.SendMail && s != gmail.SendDraft {
		bad("google.gmail.send", `must be "send" or "draft", got %q`, s)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tools.CustomSecrets)) {
		if !envName.MatchString(name) {
			bad("tools.custom_secrets", "%q is not an environment variable's name", name)
		}
		for _, h := range c.Tools.CustomSecrets[name] {
			if h = strings.TrimSpace(h); h == "" || strings.ContainsAny(h, "/:@ ") {
				bad("tools.custom_secrets."+name, "must list host names like api.example.com, got %q", h)
			}
		}
	}
	if err := (tools.Policy{Level: c.Tools.Confirm, Tools: c.Tools.ConfirmTools, AfterUntrusted: c.Tools.ConfirmAfterUntrusted}).Check(); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	duration("tools.confirm_ttl", c.Tools.ConfirmTTL.Std(), time.Minute)
	duration("cluster.lease", c.Cluster.Lease.Std(), 3*time.Second)
	if c.Tools.CatalogBudget < 0 {
		bad("tools.catalog_budget", "must be 0 (no budget) or a number of tokens, got %d", c.Tools.CatalogBudget)
	}
	if z := c.Agent.TimeZone; z != "" {
		if _, err := time.LoadLocation(z); err != nil || strings.EqualFold(z, "local") {
			bad("agent.time_zone", "must be an IANA time zone such as Europe/Lisbon, got %q", z)
		}
	}
	atLeast("scheduler.max_tasks", c.Scheduler.MaxTasks, 1)
	duration("scheduler.min_interval", c.Scheduler.MinInterval, time.Minute)
	duration("scheduler.catch_up", c.Scheduler.CatchUp, 0)
	atLeast("memory.max_items", c.Memory.MaxItems, 1)
	atLeast("memory.max_chars", c.Memory.MaxChars, 20)
	if c.Files.MaxFileBytes < 0 || c.Files.MaxWorkspaceBytes < 0 {
		bad("files.max_file_bytes", "and files.max_workspace_bytes must not be negative")
	}
	if c.Exec.Enabled && len(c.Exec.Allow) == 0 {
		bad("exec.allow", "must list the commands exec may run when exec.enabled is true")
	}
	duration("exec.timeout", c.Exec.Timeout, 100*time.Millisecond)
	if c.Skills.Dir != "" {
		if st, err := os.Stat(c.Skills.Dir); err != nil || !st.IsDir() {
			bad("skills.dir", "%q is not a readable directory", c.Skills.Dir)
		}
	}
	if c.Tools.ManifestsDir != "" {
		if st, err := os.Stat(c.Tools.ManifestsDir); err != nil || !st.IsDir() {
			bad("tools.manifests_dir", "%q is not a readable directory", c.Tools.ManifestsDir)
		}
	}
	if _, err := guard.New(guard.Config{AllowHosts: c.Web.AllowHosts}); err != nil {
		bad("web.allow_hosts", "%v", strings.TrimPrefix(err.Error(), "web.allow_hosts: "))
	}
	for key, raw := range map[string]string{"web.searxng_url": c.Web.SearXNGURL, "web.brave_url": c.Web.BraveURL} {
		if u, err := url.Parse(raw); raw != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			bad(key, "must be an http(s) URL, got %q", raw)
		}
	}
	if c.Web.MaxBytes < 0 {
		bad("web.max_bytes", "must not be negative, got %d", c.Web.MaxBytes)
	}
	atLeast("web.max_chars", c.Web.MaxChars, 500)
	duration("web.timeout", c.Web.Timeout, time.Second)
	if c.HTTP.Listen == "" || !strings.Contains(c.HTTP.Listen, ":") {
		bad("http.listen", "must be host:port, got %q", c.HTTP.Listen)
	}
	duration("http.shutdown_grace", c.HTTP.ShutdownGrace.Std(), 0)
	duration("delivery.shutdown_grace", c.Delivery.ShutdownGrace.Std(), 0)
	if c.Delivery.MaxAttempts < 0 {
		bad("delivery.max_attempts", "must be 1 or more (0: the default, 3), got %d", c.Delivery.MaxAttempts)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", `must be "text" or "json", got %q`, c.Log.Format)
	}
	if set["console.user"] && c.Console.User == "" {
		bad("console.user", "must not be empty")
	}
	if t := c.Telegram; t.Enabled {
		if t.Token == "" {
			bad("telegram.token", "is required when telegram.enabled is true")
		}
		switch t.Mode {
		case "", telegram.ModePolling:
		case telegram.ModeWebhook:
			if t.WebhookURL == "" || t.WebhookSecret == "" {
				bad("telegram.webhook_url", "and telegram.webhook_secret are required when telegram.mode is webhook")
			}
		default:
			bad("telegram.mode", `must be "polling" or "webhook", got %q`, t.Mode)
		}
		if t.APIEndpoint != "" && strings.Count(t.APIEndpoint, "%s") != 2 {
			bad("telegram.api_endpoint", "must contain two %%s (token, method), got %q", t.APIEndpoint)
		}
		atLeast("telegram.workers", t.Workers, 1)
		duration("telegram.poll_timeout", t.PollTimeout, time.Second)
		duration("telegram.typing_interval", t.TypingInterval, time.Second)
		duration("telegram.max_backoff", t.MaxBackoff, time.Second)
	}
	if sl := c.Slack; sl.Enabled {
		if !strings.HasPrefix(sl.BotToken, "xoxb-") {
			bad("slack.bot_token", "must be a bot token starting with xoxb-")
		}
		switch sl.Mode {
		case "", slack.ModeSocket:
			if !strings.HasPrefix(sl.AppToken, "xapp-") {
				bad("slack.app_token", "must be an app-level token starting with xapp- when slack.mode is socket")
			}
		case slack.ModeEvents:
			if sl.SigningSecret == "" {
				bad("slack.signing_secret", "is required when slack.mode is events")
			}
		default:
			bad("slack.mode", `must be "socket" or "events", got %q`, sl.Mode)
		}
		atLeast("slack.workers", sl.Workers, 1)
		atLeast("slack.attempts", sl.Attempts, 1)
		atLeast("slack.chunk_size", sl.ChunkSize, 100)
		duration("slack.backoff", sl.Backoff, time.Millisecond)
	}
	return errors.Join(errs...)
}

// model is the model requests name: llm.model, else the adapter's default.
func (c Config) model() string {
	if c.LLM.Engine.Model != "" {
		return c.LLM.Engine.Model
	}
	return openai.DefaultModel
}

// requireLLM checks what talking to the model needs: OpenAI's service
// needs a key; a local server (Ollama, vLLM, LM Studio) usually needs none.
func (c Config) requireLLM() error {
	base := c.LLM.BaseURL
	if base == "" {
		base = openai.DefaultBaseURL
	}
	u, err := url.Parse(base)
	if strings.TrimSpace(c.LLM.APIKey) == "" && err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return errors.New("config: llm.api_key is empty and llm.base_url is OpenAI's: set the key (the sample reads ${OPENAI_API_KEY}), or point llm.base_url at a local server")
	}
	return nil
}
