// Package settings is config.yaml: the program's sections, each of the
// type its package declares (a channel's section is its channel's own
// config type, from the list of channels the program runs), the
// defaults the program owns, reading the file and the environment, and
// checking what decodes fine but makes no sense. Every key is documented
// in the sample config.yaml and docs/configuration.md.
package settings

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/bridge/console"
	"loadout/bridge/triggers"
	"loadout/chat"
	"loadout/chat/openai"
	"loadout/cluster"
	"loadout/config"
	"loadout/google/workspace"
	"loadout/logs"
	"loadout/store"
	"loadout/tools"
	"loadout/tools/browser"
	"loadout/tools/files"
	"loadout/tools/mcp"
	"loadout/tools/memory"
	"loadout/tools/pdf"
	"loadout/tools/schedule"
	"loadout/tools/shell"
	"loadout/tools/skills"
	"loadout/tools/web"
	"loadout/ui"
	"loadout/voice"
)

// Config is config.yaml. A key left out takes the default of the package
// that uses it (the package Configs below carry the yaml tags, so a knob a
// package has is a key, and its zero value means "the package default");
// Defaults holds only what the program owns.
type Config struct {
	Agent   AgentConfig    `yaml:"agent"`
	LLM     LLMConfig      `yaml:"llm"`
	Store   StoreConfig    `yaml:"store"`
	Tools   ToolsConfig    `yaml:"tools"`
	Web     web.Config     `yaml:"web"`
	Browser browser.Config `yaml:"browser"`
	Skills  skills.Config  `yaml:"skills"`
	Memory  memory.Config  `yaml:"memory"`
	// Embeddings rank memory, history search and find_tools by meaning
	// too; off while embeddings.model is empty.
	Embeddings openai.EmbeddingsConfig `yaml:"embeddings"`
	Files      files.Config            `yaml:"files"`
	Exec       shell.Config            `yaml:"exec"`
	PDF        pdf.Config              `yaml:"pdf"`
	Scheduler  schedule.Config         `yaml:"scheduler"`
	MCP        mcp.Config              `yaml:"mcp"`
	Cluster    cluster.Config          `yaml:"cluster"`
	HTTP       HTTPConfig              `yaml:"http"`
	Delivery   DeliveryConfig          `yaml:"delivery"`
	Log        logs.Config             `yaml:"log"`
	Console    console.Config          `yaml:"console"`
	Google     GoogleConfig            `yaml:"google"`
	Voice      voice.Config            `yaml:"voice"`
	// Triggers are the URLs that start turns in people's chats
	// (POST /hooks/<name>).
	Triggers []triggers.Trigger `yaml:"triggers"`
	// Limits are the spend caps.
	Limits chat.Limits `yaml:"limits"`
	UI     UIConfig    `yaml:"ui"`
	// Channels are the sections of the channels serve runs, by name, each
	// of its channel's own config type (see ChannelKinds).
	Channels map[string]any `yaml:"-"`
}

// AgentConfig is the assistant's identity.
type AgentConfig struct {
	Name         string `yaml:"name"`
	SystemPrompt string `yaml:"system_prompt"`
	// TimeZone is the people's time zone unless a task says another.
	TimeZone string `yaml:"time_zone"`
	// Delegation bounds sub-agents: max_delegation_depth,
	// max_parallel_delegates, delegate_steps, delegate_timeout.
	Delegation chat.DelegateConfig `yaml:",inline"`
}

// LLMConfig is the OpenAI-compatible model service and the engine's
// limits.
type LLMConfig struct {
	openai.Config `yaml:",inline"`
	Engine        chat.Config `yaml:",inline"`
	// Failover is llm.fallbacks and llm.breaker: the services asked when
	// llm's fails.
	Failover openai.FailoverConfig `yaml:",inline"`
	// Vision shows the model the pictures people send, as image input.
	Vision bool `yaml:"vision"`
}

// Check checks the llm section: the model service's keys and the
// engine's.
func (c LLMConfig) Check(ch *config.Checker) {
	c.Config.Check(ch)
	c.Engine.Check(ch)
	c.Failover.Check(ch)
}

// StoreConfig is the store section; ToolsConfig the tools section;
// GoogleConfig the google section, GmailConfig its gmail part; UIConfig
// the ui section, the web console.
type (
	StoreConfig  = store.Config
	ToolsConfig  = tools.Config
	GoogleConfig = workspace.Config
	GmailConfig  = workspace.GmailConfig
	UIConfig     = ui.Config
)

// DeliveryConfig is the delivery pipeline every channel's messages go
// through.
type DeliveryConfig struct {
	// MaxAttempts is how often the process may end under a message's
	// turn before the message is set aside as poison, the ends after the
	// first counted only while it ran alone (bridge.Gate); default 3.
	MaxAttempts int `yaml:"max_attempts"`
	// ShutdownGrace is how long in-flight turns may run after a stop
	// signal, in every command (serve and chat); unset, the older
	// http.shutdown_grace, else 30s.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
}

// Grace is the shutdown grace: delivery.shutdown_grace, else its older
// name http.shutdown_grace.
func (c Config) Grace() time.Duration {
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
	// Pprof serves Go's profiles at /debug/pprof/; only then are
	// allocations sampled for heap profiles (see internal/startgc).
	Pprof bool `yaml:"pprof"`
}

// Defaults are what the program owns of the configuration.
func Defaults() Config {
	return Config{
		Agent: AgentConfig{
			Name:         "loadout",
			SystemPrompt: "You are a helpful personal assistant. Answer briefly and plainly. Use tools when they help; load a tool group before using its tools.",
		},
		Store: StoreConfig{Path: "data/loadout.db"},
		HTTP:  HTTPConfig{Listen: "127.0.0.1:8080", ShutdownGrace: Duration(bridge.DefaultShutdownGrace), Metrics: true},
		Log:   logs.Config{Level: "info", Format: "text"},
	}
}

// Path picks the file: the -config flag, else LOADOUT_CONFIG, else
// ./config.yaml.
func Path(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	if p := getenv("LOADOUT_CONFIG"); p != "" {
		return p
	}
	return "config.yaml"
}

// Load reads, expands and checks a config file. Every error names
// the offending key.
func Load(path string, getenv func(string) string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(raw, getenv)
}

// Parse reads raw, a config file, as Load does.
func Parse(raw []byte, getenv func(string) string) (Config, error) {
	cfg := Defaults()
	set, err := loadFile(raw, getenv, &cfg)
	if err != nil {
		return Config{}, err
	}
	if cfg.Google.TokenKey == "" {
		// The name the key had before every key got its LOADOUT_ variable.
		cfg.Google.TokenKey = getenv("LOADOUT_TOKEN_KEY")
	}
	return cfg, cfg.Validate(set)
}

// Duration is a time.Duration written as "30s" or "2m" in YAML.
type Duration = config.Duration

// Validate checks values that decode fine but make no sense. set holds
// the keys the file or the environment gave: a knob left out takes its
// package's default, one given must be usable.
func (c Config) Validate(set config.Set) error {
	sections := map[string]config.Section{
		"llm": c.LLM, "scheduler": c.Scheduler, "memory": c.Memory, "files": c.Files, "exec": c.Exec,
		"web": c.Web, "browser": c.Browser, "mcp": c.MCP, "voice": c.Voice, "google": c.Google, "store": c.Store, "tools": c.Tools,
		"skills": c.Skills, "pdf": c.PDF, "cluster": c.Cluster, "log": c.Log, "console": c.Console,
		"limits": c.Limits,
		"ui":     c.UI, "embeddings": c.Embeddings,
	}
	for _, k := range c.EnabledChannels() {
		if s, ok := c.Section(k).(config.Section); ok {
			sections[k.Name()] = s
		}
	}
	errs := config.Check(set, sections)
	agent := &config.Checker{Set: set, Section: "agent"}
	c.Agent.Delegation.Check(agent)
	errs = append(errs, agent.Errors()...)
	// What this command owns.
	ch := &config.Checker{Set: set}
	if z := c.Agent.TimeZone; z != "" {
		if _, err := time.LoadLocation(z); err != nil || strings.EqualFold(z, "local") {
			ch.Bad("agent.time_zone", "must be an IANA time zone such as Europe/Lisbon, got %q", z)
		}
	}
	if c.HTTP.Listen == "" || !strings.Contains(c.HTTP.Listen, ":") {
		ch.Bad("http.listen", "must be host:port, got %q", c.HTTP.Listen)
	}
	ch.Duration("http.shutdown_grace", c.HTTP.ShutdownGrace.Std(), 0)
	ch.Duration("delivery.shutdown_grace", c.Delivery.ShutdownGrace.Std(), 0)
	if c.Limits.Costly() && len(c.LLM.Engine.Prices) == 0 {
		ch.Bad("limits", "a cap in money (daily_cost_per_person, daily_cost_per_chat, monthly_cost_per_person) needs llm.prices, the price of each model")
	}
	var enabled []string
	for _, k := range c.EnabledChannels() {
		enabled = append(enabled, k.Name())
	}
	triggers.Check(ch, c.Triggers, enabled)
	if m := c.Embeddings.Model; c.Embeddings.On() && len(c.LLM.Engine.Prices) > 0 {
		if _, ok := c.LLM.Engine.Prices[m]; !ok {
			ch.Bad("llm.prices", "has no price for the embedding model %q (embeddings.model): add llm.prices.%s.input, its price per million tokens (0 for a local model)", m, m)
		}
	}
	if c.Delivery.MaxAttempts < 0 {
		ch.Bad("delivery.max_attempts", "must be 1 or more (0: the default, 3), got %d", c.Delivery.MaxAttempts)
	}
	return errors.Join(append(errs, ch.Errors()...)...)
}

// Model is the model requests name: llm.model, else the adapter's default.
func (c Config) Model() string {
	if c.LLM.Engine.Model != "" {
		return c.LLM.Engine.Model
	}
	return openai.DefaultModel
}

// EmbeddingsConfig is the embeddings section with its defaults: llm's
// base URL and key where it names none.
func (c Config) EmbeddingsConfig() openai.EmbeddingsConfig {
	return c.Embeddings.WithDefaults(c.LLM.Config)
}

// RequireLLM checks what talking to the model needs (openai.Config.Usable),
// for llm and each of llm.fallbacks.
func (c Config) RequireLLM() error {
	if err := c.LLM.Config.Usable(); err != nil {
		return err
	}
	if err := c.EmbeddingsConfig().Usable(); err != nil {
		return err
	}
	return c.LLM.Failover.Usable()
}
