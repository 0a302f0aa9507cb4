package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"loadout/bridge"
	"loadout/chat"
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
