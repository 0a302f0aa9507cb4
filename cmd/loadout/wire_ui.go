package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/config"
	"loadout/tools"
	"loadout/ui"
)

// UIConfig is the ui section: the web console.
type UIConfig = ui.Config

// wireUI builds the web console and serves it on the process's mux, and
// adds /web to the commands. It is called only when ui.enabled: with the
// console off nothing of it exists.
func (a *app) wireUI() error {
	d := ui.Deps{Store: a.db, Chats: &a.hub, Registry: a.reg, Count: a.tokens.Count, Scheduler: a.scheduler,
		Status: a.uiStatus, Settings: a.cfg.settings, Listen: a.cfg.HTTP.Listen, Logger: a.log}
	if a.google != nil {
		d.Google = a.google
	}
	if len(a.cfg.LLM.Engine.Prices) > 0 {
		// A chat's tokens priced at llm.prices, as its spend is counted
		// for the caps (a model not listed at the dearest listed).
		d.Cost = func(prompt, completion int64) (string, bool) {
			v, ok := a.engine.Cost(a.cfg.model(), chat.Usage{PromptTokens: int(prompt), CompletionTokens: int(completion)})
			return fmt.Sprintf("%.4f", v), ok
		}
	}
	c, err := ui.New(a.cfg.UI, d)
	if err != nil {
		return err
	}
	c.Mount(a.mux)
	c.Register(a.router)
	a.web = c
	a.log.Info("web console", "url", c.URL()+"/login")
	return nil
}

// uiStatus is the overview's state of the process: what /readyz and
// /status say.
func (a *app) uiStatus(ctx context.Context) ui.Status {
	st := ui.Status{Model: a.cfg.model()}
	if a.providers != nil {
		for _, p := range a.providers.Providers() {
			st.Providers = append(st.Providers, providerLine(p))
		}
		if !a.providers.Ready() {
			st.Problems = append(st.Problems, "every model provider is cooling off after failures")
		}
	}
	if err := a.db.Gorm().WithContext(ctx).Exec("SELECT 1").Error; err != nil {
		st.Problems = append(st.Problems, "store unreachable")
	}
	if errs, err := a.metrics.Errors(); err == nil {
		st.Errors = errs
	}
	for _, name := range a.hub.NotReady() {
		st.Problems = append(st.Problems, name+" not connected")
	}
	for _, c := range a.hub.Channels() {
		cs := ui.ChannelState{Name: c.Name(), Ready: true}
		if r, ok := c.(bridge.Readier); ok {
			cs.Ready = r.Ready()
		}
		for _, k := range channelKinds() {
			if k.Name() == c.Name() {
				cs.Allowed = allowedUsers(a.cfg.section(k))
			}
		}
		st.Channels = append(st.Channels, cs)
	}
	for _, m := range a.mcp {
		state := "not connected (its tools are listed once it answers)"
		if len(a.reg.GroupTools(m.GroupName(), nil)) > 0 {
			state = "listed"
		}
		st.Servers = append(st.Servers, ui.ServerState{Group: m.GroupName(), State: state})
	}
	return st
}

// allowedUsers is a channel section's allowed_users, with the channel's
// prefix: the people it lets in.
func allowedUsers(section any) []string {
	v := reflect.ValueOf(section)
	if v.Kind() != reflect.Struct {
		return nil
	}
	f := v.FieldByName("AllowedUsers")
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.String {
		return nil
	}
	return slices.Clone(f.Interface().([]string))
}

// secretKey reports whether a key's name says it holds a secret.
func secretKey(name string) bool {
	for _, s := range []string{"token", "secret", "password", "api_key", "_key", "passphrase"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// settings is the effective configuration, key by key, for the console:
// every secret (a declared one, or a key named like one) shown as set or
// unset, never its value.
func (c Config) settings() []ui.Setting {
	secrets := c.secrets()
	var out []ui.Setting
	var walk func(prefix string, v reflect.Value)
	add := func(key string, v reflect.Value) {
		s := ui.Setting{Key: key, Value: show(v)}
		name := key[strings.LastIndex(key, ".")+1:]
		if secretKey(name) && (v.Kind() == reflect.String) {
			s.Secret, s.Value = true, map[bool]string{true: "set", false: "unset"}[v.String() != ""]
		} else {
			for _, sec := range secrets {
				if sec != "" && strings.Contains(s.Value, sec) {
					s.Secret, s.Value = true, "set"
				}
			}
		}
		out = append(out, s)
	}
	walk = func(prefix string, v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			fv := v.Field(i)
			if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
				if fv.Kind() == reflect.Struct {
					walk(prefix, fv)
				}
				continue
			}
			if name == "" {
				continue
			}
			key := config.JoinKey(prefix, name)
			switch {
			case fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeFor[time.Time]():
				walk(key, fv)
			case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
				for j := range fv.Len() {
					walk(fmt.Sprintf("%s[%d]", key, j), fv.Index(j))
				}
			case fv.Kind() == reflect.Map:
				// Maps hold environment variables, headers and the
				// secrets tools may use: their names only.
				keys := make([]string, 0, fv.Len())
				for _, mk := range fv.MapKeys() {
					keys = append(keys, fmt.Sprint(mk.Interface()))
				}
				slices.Sort(keys)
				s := ui.Setting{Key: key, Value: "unset", Secret: true}
				if len(keys) > 0 {
					s.Value = "set"
					s.Key += " (" + strings.Join(keys, ", ") + ")"
				}
				out = append(out, s)
			default:
				add(key, fv)
			}
		}
	}
	walk("", reflect.ValueOf(c))
	for _, k := range channelKinds() {
		if s := reflect.ValueOf(c.section(k)); s.Kind() == reflect.Struct {
			walk(k.Name(), s)
		}
	}
	return out
}

// show is a setting's value as text.
func show(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case config.Duration:
		return x.Std().String()
	case time.Duration:
		return x.String()
	case tools.Admins:
		return fmt.Sprint(x)
	}
	switch v.Kind() {
	case reflect.Func, reflect.Chan, reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		if v.Kind() == reflect.Pointer {
			return show(v.Elem())
		}
		return "(set in code)"
	}
	return fmt.Sprint(v.Interface())
}

// secrets are every secret of the configuration: its own, the web
// console's token, and those each channel declares. None reaches a log.
func (c Config) secrets() []string {
	out := []string{c.LLM.APIKey, c.Google.ClientSecret, c.Google.TokenKey, c.Voice.APIKey}
	for _, f := range c.LLM.Failover.Fallbacks {
		out = append(out, f.APIKey)
	}
	for _, s := range c.MCP.Servers {
		out = append(out, s.ClientSecret)
	}
	out = append(out, c.UI.Secrets()...)
	return append(out, c.channelSecrets()...)
}
