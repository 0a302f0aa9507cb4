package main

import (
	"context"
	"fmt"
	"strings"

	"loadout/bridge"
	"loadout/chat"
	"loadout/ui"
)

// wireUI builds the web console and serves it on the process's mux, and
// adds /web to the commands. It is called only when ui.enabled: with the
// console off nothing of it exists.
func (a *app) wireUI() error {
	d := ui.Deps{Store: a.db, Chats: &a.hub, Registry: a.reg, Count: a.tokens.Count, Scheduler: a.scheduler,
		Status: a.overview, Settings: a.cfg.Settings, Listen: a.cfg.HTTP.Listen, Logger: a.log}
	if a.google != nil {
		d.Google = a.google
	}
	if len(a.cfg.LLM.Engine.Prices) > 0 {
		// A chat's tokens priced at llm.prices, as its spend is counted
		// for the caps (a model not listed at the dearest listed).
		d.Cost = func(prompt, completion int64) (string, bool) {
			v, ok := a.engine.Cost(a.cfg.Model(), chat.Usage{PromptTokens: int(prompt), CompletionTokens: int(completion)})
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

// overview is the console's overview: the process's status and the
// errors counted since it started.
func (a *app) overview(ctx context.Context) ui.Status {
	st := a.status(ctx)
	st.Errors, _ = a.metrics.Errors()
	st.Meaning, _ = a.db.MeaningStatus(ctx, chat.Inbound{})
	return st
}

// status is the state of the process, as /readyz and the console's
// overview show it: what is not ready (the store unreachable, a channel
// not connected, every model provider cooling off), and each provider,
// channel and MCP server.
func (a *app) status(ctx context.Context) ui.Status {
	st := ui.Status{Model: a.cfg.Model()}
	if err := a.db.Gorm().WithContext(ctx).Exec("SELECT 1").Error; err != nil {
		st.Problems = append(st.Problems, "store unreachable")
	}
	for _, name := range a.hub.NotReady() {
		st.Problems = append(st.Problems, name+" not connected")
	}
	if a.providers != nil {
		for _, p := range a.providers.Providers() {
			st.Providers = append(st.Providers, p.Line())
		}
		if !a.providers.Ready() {
			st.Problems = append(st.Problems, "every model provider is cooling off after failures ("+strings.Join(st.Providers, "; ")+")")
		}
	}
	for _, c := range a.hub.Channels() {
		cs := ui.ChannelState{Name: c.Name(), Ready: true}
		if r, ok := c.(bridge.Readier); ok {
			cs.Ready = r.Ready()
		}
		cs.Allowed = a.allowed[c.Name()]
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
