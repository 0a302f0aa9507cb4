package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"loadout/bridge"
	"loadout/bridge/triggers"
	"loadout/chat"
	"loadout/chat/openai"
	"loadout/cluster"
	"loadout/google"
	"loadout/google/workspace"
	"loadout/httpd"
	"loadout/internal/startgc"
	"loadout/metrics"
	"loadout/proc"
	"loadout/settings"
	"loadout/store"
	"loadout/tokens"
	"loadout/tools"
	browsertool "loadout/tools/browser"
	"loadout/tools/clock"
	"loadout/tools/config"
	"loadout/tools/custom"
	"loadout/tools/files"
	"loadout/tools/guard"
	"loadout/tools/history"
	"loadout/tools/manifest"
	"loadout/tools/mcp"
	"loadout/tools/memory"
	"loadout/tools/pdf"
	"loadout/tools/schedule"
	"loadout/tools/shell"
	"loadout/tools/skills"
	"loadout/tools/web"
	"loadout/voice"
)

// app is everything a command wires together.
type app struct {
	cfg    settings.Config
	log    *slog.Logger
	db     *store.DB
	reg    *tools.Registry
	tokens *tokens.Counter
	engine *chat.Engine
	router *bridge.Router
	// mux serves /healthz and whatever channels and Google register.
	mux *http.ServeMux
	// web is the web console, which tells the web channels who is
	// signed in; nil while it is off (ui.enabled).
	web bridge.WebAuth
	// hub holds the channels and reaches any chat through its own;
	// allowed is each built channel's allow-list, by name.
	hub     bridge.Hub
	allowed map[string][]string
	// google is the Google accounts store, when Google is configured.
	google *google.Accounts
	// limits replaces the HTTP server's limits; zero means the defaults.
	limits httpd.Limits
	// metrics are served at /metrics.
	metrics *metrics.Metrics
	// listAll registers the Google groups even without Google set up.
	listAll bool
	// skills are the skills of skills.dir.
	skills *skills.Set
	// workspaces are the chats' files.
	workspaces *files.Workspaces
	// browser holds the chats' browsers; nil while browser.enabled is off.
	browser *browsertool.Manager
	// voice hears voice notes and speaks answers; nil when voice is off.
	voice bridge.Voice
	// scheduler runs the scheduled tasks, in the chats' channels.
	scheduler *schedule.Scheduler
	// mcp are the MCP servers' clients; signIns sign people in to those
	// with auth: person (nil when none has).
	mcp     []*mcp.Client
	signIns *mcp.SignIns
	// gate lets a turn run alone in the process, whatever its channel.
	gate *bridge.Gate
	// exclusive runs the duties only one process sharing the database
	// may perform, under leases in it; holder names this process there.
	exclusive bridge.Exclusive
	holder    string
	// api is the HTTP client for the model and the channels' platform
	// APIs (httpd.Client).
	api *http.Client
	// providers are the model services when llm.fallbacks names any;
	// nil otherwise (the one service is asked directly).
	providers *openai.Failover
	meaning   *store.Meaning // search by meaning; nil while embeddings are off
	// started, when set, ends start-up's settings (serve's collector
	// setting); settle calls it.
	started func()
}

// newApp opens the store, builds the registry and the engine. The caller
// closes a.db.
func newApp(ctx context.Context, cfg settings.Config, log *slog.Logger) (*app, error) {
	return buildApp(ctx, cfg, log, false)
}

// buildApp is newApp; listAll also registers the Google groups when
// Google is not set up, so `loadout tools` can show their cost.
func buildApp(ctx context.Context, cfg settings.Config, log *slog.Logger, listAll bool) (*app, error) {
	counter, err := tokens.New()
	if err != nil {
		return nil, err
	}
	db, err := cfg.Store.Open()
	if err != nil {
		return nil, err
	}
	// One set of places bounds every PDF worker of the process: the pdf
	// tools', web pages' and Gmail attachments' alike (pdf.max_workers).
	cfg.PDF.Limits.Slots = proc.NewSlots(cfg.PDF.MaxWorkers)
	a := &app{cfg: cfg, log: log, db: db, tokens: counter, mux: http.NewServeMux(), metrics: metrics.New(db), listAll: listAll,
		holder: cluster.Holder(), api: httpd.Client(), gate: bridge.NewGate(0)}
	a.exclusive = cluster.Exclusive(db, a.holder, cfg.Cluster.Lease.Std(), log)
	if a.meaning = cfg.Meaning(log, a.api, a.metrics, func(ctx context.Context, m string, n int) { a.engine.ChargeEmbedding(ctx, m, n) }); a.meaning != nil {
		db.SetMeaning(a.meaning)
	}
	a.reg, err = a.registry(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Tools.ConfirmTools)) {
		if _, ok := a.reg.Tool(name); !ok {
			// A warning, not an error: an MCP server down at start lists
			// its tools later.
			log.Warn("tools.confirm_tools names a tool that is not registered (yet); check the spelling", "tool", name)
		}
	}
	oc := cfg.LLM.Config
	oc.Logger = log
	if oc.HTTPClient == nil {
		oc.HTTPClient = a.api
	}
	var model chat.Model
	if len(cfg.LLM.Failover.Fallbacks) > 0 {
		fc := cfg.LLM.Failover
		fc.Observer = a.metrics
		a.providers = openai.NewFailover(oc, fc)
		a.metrics.Providers(a.providers.Providers)
		model = a.providers
	} else {
		model = openai.New(oc)
	}
	model = a.metrics.Model(model)
	ec, err := cfg.Engine()
	if err != nil {
		db.Close()
		return nil, err
	}
	ec.Count, ec.Exact, ec.Logger = tokens.Estimate, counter.Count, log
	if listing := a.skills.Listing(); listing != "" {
		ec.Sections = append(ec.Sections, func(context.Context, chat.Inbound) string { return listing })
	}
	if cfg.LLM.Vision {
		ec.Images = a.image
	}
	ec.OnClear = append(ec.OnClear, a.browser.Clear) // /clear ends the chat's browser and its profile
	ec.Sections = append(ec.Sections, func(ctx context.Context, in chat.Inbound) string {
		return memory.Prompt(ctx, cfg.Memory, db, in.UserKey, tokens.Estimate)
	})
	ec.Middleware = []tools.Middleware{a.metrics.Tools(a.reg)}
	if ec.Limits.Capped() || len(ec.Prices) > 0 {
		// Spend is counted only where something reads it: a cap, or
		// prices to show.
		ec.Ledger, ec.Charged = db, a.metrics.Charged
	}
	a.engine = chat.New(ec, model, db, a.reg)
	a.router = bridge.NewRouter(a.engine, cfg.Agent.Name)
	if a.providers != nil {
		a.router.AddStatus(func(context.Context, chat.Inbound) (string, error) { return a.providers.Status(), nil })
	}
	a.router.AddStatus(db.MeaningStatus)
	// Voice notes (voice.Setup): the service, over the llm section's
	// server unless the voice section names its own.
	a.voice = voice.Setup(cfg.Voice, cmp.Or(cfg.LLM.BaseURL, openai.DefaultBaseURL), cfg.LLM.APIKey,
		voice.Options{Workspace: a.workspaces, Meter: a.metrics, HTTPClient: a.api, Logger: log.With("part", "voice")}, db, a.router)
	workspace.Commands(a.router, a.mux, cfg.Google, a.google, &a.hub, a.log)
	hooks := triggers.New(cfg.Triggers, db, &a.hub, log.With("part", "triggers"))
	if err := hooks.CheckGroups(func(g string) bool { _, ok := a.reg.Group(g); return ok }); err != nil {
		db.Close()
		return nil, err
	}
	hooks.Mount(a.mux, a.router, &a.hub, cfg.UI.BaseURL)
	a.wireMCPSignIns()
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	a.mux.HandleFunc("GET /readyz", a.readyz)
	if cfg.HTTP.Metrics {
		a.mux.Handle("GET /metrics", a.metrics.Handler())
	}
	if cfg.HTTP.Pprof {
		startgc.Profiles() // sampling is off in a process that serves no heap profile
		a.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		a.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	}
	return a, nil
}

// readyz answers 200 when the store answers and every channel is
// connected, else 503 with what is not ready (status). With
// llm.fallbacks it lists each model provider's state, and is not ready
// only while every one of them is cooling off after failures.
func (a *app) readyz(w http.ResponseWriter, r *http.Request) {
	st := a.status(r.Context())
	if len(st.Problems) > 0 {
		http.Error(w, strings.Join(st.Problems, "; "), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
	for _, line := range st.Providers {
		fmt.Fprintln(w, line)
	}
}

// registry registers every tool and group. A name collision is an error
// naming both sources.
func (a *app) registry(ctx context.Context) (*tools.Registry, error) {
	reg := tools.NewRegistry()
	// delegate runs on the engine, built after the registry, before any call.
	core := []tools.Tool{tools.LoadGroup(reg), tools.UnloadGroup(reg), tools.FindToolsByMeaning(reg, a.meaning.Tools()), clock.Tool(nil)}
	if err := reg.Add(append(core, chat.DelegateTools(a.cfg.Agent.Delegation, func() *chat.Engine { return a.engine })...)...); err != nil {
		return nil, err
	}
	if err := a.registerFiles(reg); err != nil {
		return nil, err
	}
	// memory is core, with what is remembered in the system prompt;
	// searching earlier conversations is a group.
	if err := reg.Add(memory.Tool(a.cfg.Memory, a.db)); err != nil {
		return nil, err
	}
	if err := history.Register(reg, a.db); err != nil {
		return nil, err
	}
	set, err := skills.Load(a.cfg.Skills.Dir)
	if err != nil {
		return nil, err
	}
	a.skills = set
	if set.Len() > 0 {
		if err := reg.Add(set.Tool()); err != nil {
			return nil, err
		}
	}
	g, err := guard.New(guard.Config{AllowHosts: a.cfg.Web.AllowHosts})
	if err != nil {
		return nil, err
	}
	wc := a.cfg.Web
	wc.Guard, wc.PDF = g, a.cfg.PDF.Limits
	if err := web.Register(reg, wc); err != nil {
		return nil, err
	}
	if a.browser, err = browsertool.Register(reg, a.cfg.Browser, browsertool.Deps{Guard: g, Logger: a.log, Save: a.workspaces.SaveForCaller}); err != nil {
		return nil, err
	}
	cm := custom.New(reg, a.db, &http.Client{Transport: g.Transport(), Timeout: max(wc.Timeout, 20*time.Second)}, a.cfg.Tools.Admins, a.cfg.Tools.CustomSecrets, g.CheckURL)
	if err := cm.Register(ctx); err != nil {
		return nil, err
	}
	sc := a.cfg.Scheduler
	sc.TimeZone, sc.Logger, sc.Admins = a.cfg.Agent.TimeZone, a.log, tools.NewAdmins(a.cfg.Tools.Admins)
	sc.Chores = append(sc.Chores, a.db.AuditPruner(a.cfg.Tools.AuditDays, a.log))
	a.scheduler = schedule.New(sc, a.db, a.hub.Submit)
	if err := a.scheduler.Register(reg); err != nil {
		return nil, err
	}
	pc := a.cfg.PDF
	pc.Workspaces, pc.Fetch = a.workspaces, web.Fetcher(g, wc.Timeout)
	pc.Drive = workspace.DriveFiles(func() *google.Accounts { return a.google })
	if err := pdf.Register(reg, pc); err != nil {
		return nil, err
	}
	if err := config.Register(reg, a.db, config.Defaults{Name: a.cfg.Agent.Name, SystemPrompt: a.cfg.Agent.SystemPrompt, Model: a.cfg.Model(),
		Admins: tools.NewAdmins(a.cfg.Tools.Admins)}); err != nil {
		return nil, err
	}
	if err := manifest.Register(reg, a.cfg.Tools.ManifestsDir); err != nil {
		return nil, err
	}
	if a.signIns, err = a.mcpSignIns(&http.Client{Transport: g.Transport(), Timeout: 30 * time.Second}); err != nil {
		return nil, err
	}
	deps := mcp.Deps{ElicitationTTL: a.cfg.MCP.ElicitationTTL, Sample: a.sample, Save: a.workspaces.SaveForCaller, Workspace: a.workspaces.Dir,
		SignIns: a.signIns, Rules: a.db}
	for _, s := range a.cfg.MCP.Servers {
		a.mcp = append(a.mcp, mcp.New(s, deps, a.log))
	}
	if err := mcp.Register(ctx, reg, a.mcp...); err != nil {
		return nil, fmt.Errorf("mcp.servers: %w", err)
	}
	if err := a.registerGoogle(ctx, reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// sample runs an MCP server's sampling request on the engine's model, for
// the chat and person of the call (the engine is built after the
// registry, before any call runs).
func (a *app) sample(ctx context.Context, r mcp.SampleRequest) (mcp.SampleAnswer, error) {
	s := chat.Sampling{System: r.System, MaxTokens: r.MaxTokens, Tools: r.Tools, Hints: r.Hints, Models: []string{a.cfg.Model()}}
	for _, f := range a.cfg.LLM.Failover.Fallbacks {
		s.Models = append(s.Models, f.Model)
	}
	for _, m := range r.Messages {
		msg := chat.Message{Role: chat.Role(m.Role), Text: m.Text, ToolCallID: m.CallID}
		for _, k := range m.Calls {
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: k.ID, Name: k.Name, Arguments: k.Arguments})
		}
		s.Messages = append(s.Messages, msg)
	}
	got, err := a.engine.SampleWithTools(ctx, r.ChatKey, r.UserKey, s)
	ans := mcp.SampleAnswer{Text: got.Text, Model: got.Model}
	for _, k := range got.ToolCalls {
		ans.Calls = append(ans.Calls, mcp.SampleCall{ID: k.ID, Name: k.Name, Arguments: k.Arguments})
	}
	return ans, err
}

// claim is the chat claim of processes sharing a PostgreSQL database,
// which may all take webhook events; with SQLite one process serves the
// file and keeps its chats' order in memory.
func (a *app) claim() bridge.Claim {
	if a.cfg.Store.Driver != "postgres" {
		return nil
	}
	return cluster.Claim(a.db, a.holder, a.cfg.Cluster.Lease.Std(), a.log)
}

// runMCP keeps the MCP servers running until ctx ends; the returned
// function waits for them to stop.
func (a *app) runMCP(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for _, c := range a.mcp {
		wg.Go(func() { c.Run(ctx) })
	}
	return wg.Wait
}

// delivery is what the process gives a channel: the same for every
// channel but its journal and its log's name.
func (a *app) delivery(channel string) (bridge.Delivery, error) {
	journal, err := a.journal(channel)
	if err != nil {
		return bridge.Delivery{}, err
	}
	return bridge.Delivery{
		ShutdownGrace: a.cfg.Grace(), MaxStarts: a.cfg.Delivery.MaxAttempts, Journal: journal, Gate: a.gate,
		Exclusive: a.exclusive, Claim: a.claim(), Files: a.workspaces, Voice: a.voice, HTTPClient: a.api,
		Logger: a.log, Observer: a.metrics,
	}, nil
}

// journal is where a channel's pipeline records each part the platform
// took: a file beside a store this process alone serves, the store
// itself where processes share it (a file would be seen by its own
// process only, while another takes the chat over).
func (a *app) journal(channel string) (bridge.Journal, error) {
	if a.cfg.Store.Driver == "postgres" {
		return bridge.InboxJournal(a.db), nil
	}
	return bridge.OpenJournalIn(a.cfg.Store.Dir(), channel)
}

// registerFiles adds the files group, over each chat's workspace
// (files.dir, by default "files" beside the store), and exec when
// exec.enabled.
func (a *app) registerFiles(reg *tools.Registry) error {
	fc := a.cfg.Files
	if fc.Dir == "" {
		dir := a.cfg.Store.Dir()
		if dir == "" {
			dir = os.TempDir()
		}
		fc.Dir = filepath.Join(dir, "files")
	}
	ws, err := files.New(fc)
	if err != nil {
		return err
	}
	a.workspaces = ws
	if err := ws.Register(reg, &a.hub); err != nil {
		return err
	}
	// Commands never read the store, wherever it is.
	var protect []string
	if abs, err := filepath.Abs(a.cfg.Store.Path); a.cfg.Store.Path != "" && err == nil {
		protect = []string{abs, abs + "-wal", abs + "-shm"}
	}
	return shell.Register(reg, a.cfg.Exec, ws, protect...)
}

// maxImage is the largest picture given to the model.
const maxImage = 5 << 20

// image reads a picture of a chat's workspace for the model.
func (a *app) image(ctx context.Context, chatKey, name string) (chat.Image, error) {
	mimeType, data, err := a.workspaces.Image(chatKey, name, maxImage)
	return chat.Image{MIME: mimeType, Data: data}, err
}
