// Package mcp makes each configured MCP server a tool group, mcp_<name>,
// through the official Go SDK. A server's tools are listed once at start
// (or, when it cannot be reached then, on the group's first load) and
// cached; calls go through loadout's executor like any tool. A server that
// stops is restarted with backoff, and its calls meanwhile answer
// unavailable.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/backoff"
	"loadout/config"
	"loadout/tools"
)

// Server is one entry of mcp.servers: a command run over stdio, or a
// streamable-HTTP endpoint.
type Server struct {
	// Name names the group (mcp_<name>) and prefixes the tools
	// (<name>_<tool>).
	Name string `yaml:"name"`
	// Description is the group's line in the listing; default the
	// server's own instructions, else a generic line.
	Description string `yaml:"description"`
	// Command and Args start a stdio server; Env is added to the small
	// environment it gets (PATH, HOME, LANG, TMPDIR and USER of loadout's).
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args" secret:"url"`
	Env     map[string]string `yaml:"env" secret:"true"`
	// URL is a streamable-HTTP server; Headers go with every request.
	URL     string            `yaml:"url" secret:"url"`
	Headers map[string]string `yaml:"headers" secret:"true"`
	// Auth "person" signs each person in to the server with their own
	// account (OAuth 2.1, the MCP authorization spec); "" uses Headers.
	Auth string `yaml:"auth"`
	// ClientID and ClientSecret identify loadout at the server's
	// authorization server when it has no dynamic registration; Scopes
	// replace the scopes the server names.
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret" secret:"true"`
	Scopes       []string `yaml:"scopes"`
	// Timeout bounds one call. Default 60s.
	Timeout time.Duration `yaml:"timeout"`
	// Roots offers the server the calling chat's workspace as its one
	// root (a file:// URI), changed as calls come from other chats.
	// Default true; false offers no roots.
	Roots *bool `yaml:"roots"`
	// SamplingTools lets the server sample with tools: the model may
	// call the server's own tools in its answer, and the server runs
	// them (loadout never does). Default false: such a request is
	// refused.
	SamplingTools bool `yaml:"sampling_tools"`

	// transport, when set, replaces Command and URL (tests use the SDK's
	// in-memory transport).
	transport func() sdk.Transport
}

// Config is the mcp section.
type Config struct {
	Servers []Server `yaml:"servers"`
	// ElicitationTTL is how long a server's question waits for the
	// person's answer; default 10 minutes.
	ElicitationTTL time.Duration `yaml:"elicitation_ttl"`
	// RedirectURL is loadout's public URL of CallbackPath, where people
	// come back after signing in to a server with auth: person.
	RedirectURL string `yaml:"redirect_url" secret:"url"`
}

// NeedsSignIn reports whether a server signs people (or the operator) in.
func (c Config) NeedsSignIn() bool {
	for _, s := range c.Servers {
		if s.Auth != AuthNone {
			return true
		}
	}
	return false
}

// Deps are what the servers' requests reach in loadout. The zero value
// answers every request a server makes of the client with an error.
type Deps struct {
	// ElicitationTTL is Config.ElicitationTTL.
	ElicitationTTL time.Duration
	// Sample runs a server's sampling request; nil leaves sampling off
	// (not offered to servers).
	Sample Sampler
	// Rules keeps a person's allowance for a server to use the model as
	// their rule; nil asks them at every request.
	Rules Rules
	// Workspace is a chat's workspace directory, the root offered to
	// servers; nil offers none.
	Workspace func(chatKey string) string
	// SignIns signs people in to servers with auth: person; nil leaves
	// those servers unusable.
	SignIns *SignIns
	// Save keeps a file a tool returned (an image, audio, a resource's
	// bytes) in the calling chat's workspace (tools.CallerFrom(ctx)) and
	// returns the name it got; nil keeps none.
	Save func(ctx context.Context, name string, data []byte) (string, error)
}

func (d Deps) elicitationTTL() time.Duration {
	if d.ElicitationTTL <= 0 {
		return DefaultElicitationTTL
	}
	return d.ElicitationTTL
}

// Check reports the first problem of each server, naming its key.
func (c Config) Check(ch *config.Checker) {
	seen := map[string]bool{}
	for i, s := range c.Servers {
		key := fmt.Sprintf("servers[%d]", i)
		bad := func(field, format string, a ...any) { ch.Bad(key+"."+field, format, a...) }
		switch {
		case !validName(s.Name):
			bad("name", "must be 1–40 of a-z, 0-9 and _, starting with a letter, got %q", s.Name)
		case seen[s.Name]:
			bad("name", "%q is used by another server", s.Name)
		}
		seen[s.Name] = true
		switch {
		case (s.Command == "") == (s.URL == ""):
			bad("command", "give either command (a stdio server) or url (a streamable-HTTP server)")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("url", "must be an http(s) URL, got %q", s.URL)
			}
		}
		if s.Timeout < 0 {
			bad("timeout", "must not be negative")
		}
		switch {
		case s.Auth != AuthNone && s.Auth != AuthPerson && s.Auth != AuthOperator:
			bad("auth", "must be person, operator or left out, got %q", s.Auth)
		case s.Auth != AuthNone && s.URL == "":
			bad("auth", "a sign-in needs a streamable-HTTP server (url)")
		case s.Auth == AuthPerson && c.RedirectURL == "":
			ch.Bad("redirect_url", "is needed for servers[%d].auth: person: loadout's public URL of %s", i, CallbackPath)
		}
	}
	if c.ElicitationTTL < 0 {
		ch.Bad("elicitation_ttl", "must not be negative")
	}
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 40 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// listTimeout bounds connecting and listing tools at start, so a server
// that hangs cannot hold start-up for long.
const listTimeout = 10 * time.Second

// Client is one server: its connection, its cached tools and the
// supervisor that restarts it.
type Client struct {
	srv    Server
	deps   Deps
	log    *slog.Logger
	reg    *tools.Registry
	policy backoff.Policy

	connMu sync.Mutex // one connection attempt at a time
	mu     sync.Mutex
	sess   *sdk.ClientSession
	down   string // why there is no session, for the model and the log
	listed bool   // the group holds the server's tools
	desc   string // the group's line
	// calls are the calls running on the server now: a request the
	// server makes of the client is answered for the turn of its call.
	calls map[*callState]bool
	// client is the SDK's client of the session, and root the root it
	// offers now.
	client *sdk.Client
	root   string
	// rootsRead is closed (and replaced) each time the server reads the
	// roots; rootsAsked is set once it has.
	rootsRead  chan struct{}
	rootsAsked bool
	// descs are the tools' descriptions as last listed, and shown as
	// they were when the group was last loaded with the person's
	// agreement (or first listed).
	descs, shown map[string]string
	// people are the sessions of each person signed in (auth: person),
	// by user key; clientID and clientSecret are loadout's registration
	// at the server's authorization server.
	people                 map[string]*sdk.ClientSession
	clientID, clientSecret string
}

// rootsWait bounds how long a call waits for a server that reads roots
// to read them again after they changed, so that it works in the root
// of the chat that calls.
const rootsWait = 2 * time.Second

// watchRoots is a receiving middleware that notes each roots/list the
// server makes.
func (c *Client) watchRoots(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method == "roots/list" {
			c.mu.Lock()
			c.rootsAsked = true
			close(c.rootsRead)
			c.rootsRead = make(chan struct{})
			c.mu.Unlock()
		}
		return res, err
	}
}

// rootsOn reports whether the server is offered roots.
func (c *Client) rootsOn() bool {
	return c.deps.Workspace != nil && (c.srv.Roots == nil || *c.srv.Roots)
}

// offerRoot makes the calling chat's workspace the server's one root,
// telling the server when it changed (roots/list_changed). Calls from
// different chats at once share the last chat's root: the root tells a
// server where to work, and a stdio server reaches the whole file system
// as loadout's user anyway.
func (c *Client) offerRoot(ctx context.Context) {
	if !c.rootsOn() {
		return
	}
	chatKey := tools.CallerFrom(ctx).ChatKey
	if chatKey == "" {
		return
	}
	uri := (&url.URL{Scheme: "file", Path: c.deps.Workspace(chatKey)}).String()
	c.mu.Lock()
	client, old := c.client, c.root
	if client == nil || old == uri {
		c.mu.Unlock()
		return
	}
	c.root = uri
	read, asked := c.rootsRead, c.rootsAsked
	c.mu.Unlock()
	if old != "" {
		client.RemoveRoots(old)
	}
	client.AddRoots(&sdk.Root{URI: uri, Name: "workspace"})
	if asked {
		// A server that reads roots reads them again when told they
		// changed: the call waits for that, a little.
		t := time.NewTimer(rootsWait)
		defer t.Stop()
		select {
		case <-read:
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// New returns the client of srv; Register adds its group to reg. deps
// answer what the server asks of loadout while its tools run.
func New(srv Server, deps Deps, log *slog.Logger) *Client {
	if srv.Timeout <= 0 {
		srv.Timeout = 60 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Client{srv: srv, deps: deps, log: log.With("mcp", srv.Name), down: "not started", calls: map[*callState]bool{}, rootsRead: make(chan struct{}), people: map[string]*sdk.ClientSession{},
		policy: backoff.Policy{Initial: time.Second, Max: time.Minute, Jitter: 0.2}}
	if deps.SignIns != nil && srv.Auth == AuthPerson {
		// A sign-in link made by another process may come back here.
		deps.SignIns.add(c)
	}
	return c
}

// GroupName is the group of the server.
func (c *Client) GroupName() string { return "mcp_" + c.srv.Name }

// Register adds the servers' groups to reg, in order, then connects to
// them all at once and lists their tools into their groups. A server that
// cannot be reached keeps a group that says so and lists the tools when
// first loaded; Run keeps trying meanwhile.
func Register(ctx context.Context, reg *tools.Registry, clients ...*Client) error {
	for _, c := range clients {
		c.reg = reg
		if err := reg.AddGroup(c.group(false)); err != nil {
			return err
		}
	}
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range clients {
		if c.srv.Auth == AuthPerson {
			continue // listed through the first person who loads it
		}
		wg.Go(func() {
			if err := c.ensure(lctx); err != nil {
				c.log.Warn("MCP server not reachable at start; its tools will be listed when its group is loaded", "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// group is the server's group; listed says whether its tools are known.
func (c *Client) group(listed bool) tools.Group {
	desc := c.srv.Description
	if desc == "" {
		c.mu.Lock()
		desc = c.desc
		c.mu.Unlock()
	}
	if desc == "" {
		desc = "Tools of the " + c.srv.Name + " MCP server"
	}
	// The tools' names and descriptions are the server's text.
	g := tools.Group{Name: c.GroupName(), DisplayName: c.srv.Name + " (MCP)", Description: desc, Prepare: c.prepare, Untrusted: true}
	switch {
	case !listed && c.srv.Auth == AuthPerson:
		g.Description += " (each person signs in; its tools are listed when loaded)"
	case !listed:
		g.Description += " (not reachable at start; its tools are listed when loaded)"
	}
	return g
}

// prepare runs when the group is loaded: it lists the tools of a server
// that was down at start, and shows the person what the server's tools
// say differently since they were last loaded (see reworded).
func (c *Client) prepare(ctx context.Context) error {
	if !c.isListed() {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		defer cancel()
		if c.srv.Auth == AuthPerson {
			s, err := c.personSession(lctx)
			if err != nil {
				return err
			}
			if err := c.list(lctx, s); err != nil {
				return c.unavailable(err.Error())
			}
		} else if err := c.ensure(lctx); err != nil {
			return c.unavailable(err.Error())
		}
	}
	return c.reworded(ctx)
}

// reworded asks the person, when the server's tools say something other
// than when they were last loaded (it told loadout they changed), whether
// to load them as they are now: a server could otherwise slip
// instructions into a description after it was first looked at. The
// load goes on only if they agree; with nobody to ask it is refused.
func (c *Client) reworded(ctx context.Context) error {
	c.mu.Lock()
	diff, now := describeChanges(c.shown, c.descs), c.descs
	c.mu.Unlock()
	if diff == "" {
		return nil
	}
	refused := &tools.Error{Code: CodeChanged,
		Message:    fmt.Sprintf("The MCP server '%s' changed what its tools say since they were last loaded; the person must agree before they are loaded again.", c.srv.Name),
		Suggestion: "Tell the person; they can ask again to load the group and will be shown what changed."}
	asker, ok := tools.AskerFrom(ctx)
	if !ok {
		return refused
	}
	text := fmt.Sprintf("The %s service changed what its tools say since they were last loaded:\n%s\n\nLoad them as they are now?", c.srv.Name, diff)
	qctx, cancel := context.WithTimeout(ctx, c.deps.elicitationTTL())
	defer cancel()
	ans, err := asker.Ask(qctx, tools.Question{Text: text, Choices: []string{"Load", "Don't load"}})
	if err != nil || !isChoice(ans, "Load", "yes", "y") {
		return refused
	}
	c.mu.Lock()
	c.shown = now
	c.mu.Unlock()
	return nil
}

// CodeChanged is the code of a load refused because the server's tools
// changed what they say and the person did not agree.
const CodeChanged = "descriptions_changed"

// describeChanges lists, for the person, the tools whose descriptions
// differ between before and now (new tools included); "" when none do
// or there is no before.
func describeChanges(before, now map[string]string) string {
	if before == nil {
		return ""
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(now)) {
		old, had := before[name]
		switch {
		case !had:
			lines = append(lines, fmt.Sprintf("- %s (new): “%s”", name, tools.Shorten(now[name], 400)))
		case old != now[name]:
			lines = append(lines, fmt.Sprintf("- %s now says: “%s” (it said: “%s”)", name, tools.Shorten(now[name], 400), tools.Shorten(old, 200)))
		}
	}
	return strings.Join(lines, "\n")
}

// ensure connects if there is no session and, unless they are already,
// lists the server's tools into its group.
func (c *Client) ensure(ctx context.Context) error {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		var err error
		if s, err = c.connect(ctx); err != nil {
			c.mu.Lock()
			c.down = err.Error()
			c.mu.Unlock()
			return err
		}
	}
	if c.isListed() {
		return nil
	}
	return c.list(ctx, s)
}

// list lists the server's tools, through session s, into its group.
func (c *Client) list(ctx context.Context, s *sdk.ClientSession) error {
	var ts []tools.Tool
	names := map[string]bool{}
	descs := map[string]string{}
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		tl := c.tool(t, names)
		ts = append(ts, tl)
		descs[tl.Name] = tl.Description
	}
	if err := c.reg.ReplaceGroup(c.group(true), ts...); err != nil {
		return err
	}
	c.mu.Lock()
	c.listed = true
	if c.shown == nil {
		// The first listing is what the person's first load shows.
		c.shown = descs
	}
	c.descs = descs
	c.mu.Unlock()
	c.log.Info("MCP server's tools listed", "tools", len(ts))
	return nil
}

// connect starts the server (or opens the HTTP session) and keeps the
// session. The caller holds connMu.
func (c *Client) connect(ctx context.Context) (*sdk.ClientSession, error) {
	client := c.newClient()
	t, cmd := c.transport()
	if c.srv.Auth == AuthOperator {
		hc, err := c.operatorClient(ctx)
		if err != nil {
			return nil, err
		}
		t = &sdk.StreamableClientTransport{Endpoint: c.srv.URL, MaxRetries: -1, HTTPClient: hc}
	}
	s, err := client.Connect(ctx, t, nil)
	if err != nil {
		// A server that started but did not finish connecting (a
		// timeout) is ended, with whatever it started.
		if cmd != nil && cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGTERM)
			go cmd.Wait()
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	c.mu.Lock()
	c.sess, c.down = s, ""
	c.client, c.root = client, ""
	if r := s.InitializeResult(); r != nil && r.Instructions != "" {
		c.desc = firstLine(r.Instructions, 120)
	}
	c.mu.Unlock()
	c.log.Info("MCP server connected")
	return s, nil
}

// newClient is an SDK client with loadout's capabilities and handlers.
func (c *Client) newClient() *sdk.Client {
	opts := &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { go c.relist() },
		ElicitationHandler:     c.elicit,
		Capabilities: &sdk.ClientCapabilities{
			Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}},
		},
	}
	if c.deps.Sample != nil {
		opts.CreateMessageWithToolsHandler = c.sample
		opts.Capabilities.Sampling = &sdk.SamplingCapabilities{}
		if c.srv.SamplingTools {
			opts.Capabilities.Sampling.Tools = &sdk.SamplingToolsCapabilities{}
		}
	}
	if c.rootsOn() {
		opts.Capabilities.RootsV2 = &sdk.RootCapabilities{ListChanged: true}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "loadout", Version: "1"}, opts)
	client.AddReceivingMiddleware(c.watchRoots)
	c.mu.Lock()
	c.rootsAsked = false // a new session's server has not read them yet
	c.mu.Unlock()
	return client
}

// relist lists the tools again after the server said they changed.
func (c *Client) relist() {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	c.mu.Lock()
	c.listed = false
	c.mu.Unlock()
	if c.srv.Auth == AuthPerson {
		return // listed again through the next person who loads the group
	}
	if err := c.ensure(ctx); err != nil {
		c.log.Warn("MCP server's tools changed but could not be listed again", "err", err)
	}
}

// Run keeps the server connected until ctx ends: when the session ends
// (the process died, the connection closed) it reconnects with backoff,
// listing the tools if that never succeeded. It closes the session on
// return.
func (c *Client) Run(ctx context.Context) {
	if c.srv.Auth == AuthPerson {
		// People's sessions open on their calls; they end here.
		<-ctx.Done()
		c.Close()
		return
	}
	b := c.policy.New()
	for {
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s == nil || !c.isListed() {
			lctx, cancel := context.WithTimeout(ctx, listTimeout)
			err := c.ensure(lctx)
			cancel()
			if ctx.Err() != nil {
				c.Close()
				return
			}
			if err != nil {
				wait := b.Next()
				c.log.Warn("MCP server unavailable; retrying", "err", err, "wait", wait)
				if b.Wait(ctx, wait) != nil {
					c.Close()
					return
				}
				continue
			}
			b.Reset()
			continue
		}
		ended := make(chan struct{})
		go func() { s.Wait(); close(ended) }()
		select {
		case <-ctx.Done():
			c.Close()
			<-ended
			return
		case <-ended:
			c.lost(s, "the server stopped")
		}
	}
}

func (c *Client) isListed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listed
}

// lost forgets session s (if it is still the current one) and closes it,
// which ends Run's wait on it.
func (c *Client) lost(s *sdk.ClientSession, why string) {
	c.mu.Lock()
	if c.sess == s {
		c.sess, c.down = nil, why
		c.log.Warn("MCP server connection lost", "why", why)
	}
	for user, p := range c.people {
		if p == s {
			delete(c.people, user)
		}
	}
	c.mu.Unlock()
	s.Close()
}

// Close ends the session (and a stdio server's process).
func (c *Client) Close() error {
	c.mu.Lock()
	s := c.sess
	c.sess, c.down = nil, "closed"
	people := c.people
	c.people = map[string]*sdk.ClientSession{}
	c.mu.Unlock()
	for _, p := range people {
		p.Close()
	}
	if s == nil {
		return nil
	}
	return s.Close()
}

// CodeToolError is the code of a call the server answered with an error.
const CodeToolError = "tool_error"

func (c *Client) unavailable(why string) *tools.Error {
	return &tools.Error{Code: tools.CodeUnavailable,
		Message:    fmt.Sprintf("The MCP server '%s' is not available (%s); loadout keeps restarting it.", c.srv.Name, firstLine(why, 200)),
		Suggestion: "Try again in a minute, or tell the person this service is down."}
}

// tool wraps one of the server's tools. names holds the loadout names
// given so far, to keep them unique.
func (c *Client) tool(t *sdk.Tool, names map[string]bool) tools.Tool {
	base := toolName(c.srv.Name, t.Name)
	name := base
	for i := 2; names[name] || name == tools.SamplingRuleTool; i++ {
		suffix := fmt.Sprintf("_%d", i)
		name = base[:min(len(base), 64-len(suffix))] + suffix
	}
	names[name] = true
	params, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil || string(params) == "null" {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" {
		desc = "The " + t.Name + " tool of the " + c.srv.Name + " MCP server."
	}
	def := tools.Definition{
		Name: name, Description: desc, Parameters: params, Timeout: c.srv.Timeout,
		ReadOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint, Effect: effect(t.Annotations),
		// A server's results are not the person's words.
		Untrusted: true,
	}
	if tools.ActingWord(def) != "" && def.Effect < tools.EffectDestructive {
		// A tool that says it sends, deletes or shares is taken at its
		// word, whatever its hints say.
		def.ReadOnly, def.Effect = false, tools.EffectDestructive
	}
	remote := t.Name
	tl := tools.Raw(def, func(ctx context.Context, args json.RawMessage) (any, error) {
		return c.call(ctx, remote, args)
	})
	// A server's schema allows what it does not name unless it says
	// otherwise; its arguments pass on as the model wrote them.
	tl.Open = true
	return tl
}

// effect is a tool's effect from its annotations: read-only when it says
// so, destructive when it says so, mutating otherwise, no annotations
// included — an unknown tool is not trusted to be read-only. (The MCP
// specification's default for a tool that is not read-only is
// destructive; loadout asks for destructiveHint, so that a server's many
// unannotated tools do not each wait for an approval. Operators who want
// them to can set tools.confirm: mutating or tools.confirm_tools.)
func effect(a *sdk.ToolAnnotations) tools.Effect {
	switch {
	case a == nil:
		return tools.EffectMutate
	case a.ReadOnlyHint:
		return tools.EffectRead
	case a.DestructiveHint != nil && *a.DestructiveHint:
		return tools.EffectDestructive
	}
	return tools.EffectMutate
}

// call runs the server's tool remote.
func (c *Client) call(ctx context.Context, remote string, args json.RawMessage) (any, error) {
	var s *sdk.ClientSession
	if c.srv.Auth == AuthPerson {
		// The caller's own session: their token, never another's.
		var err error
		if s, err = c.personSession(ctx); err != nil {
			return nil, err
		}
	} else {
		c.mu.Lock()
		sess, down := c.sess, c.down
		c.mu.Unlock()
		if sess == nil {
			return nil, c.unavailable(down)
		}
		s = sess
	}
	c.offerRoot(ctx)
	call := &callState{ctx: ctx}
	c.mu.Lock()
	c.calls[call] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, call)
		c.mu.Unlock()
	}()
	res, err := s.CallTool(context.WithValue(ctx, callKey{}, call), &sdk.CallToolParams{Name: remote, Arguments: args})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, sdk.ErrConnectionClosed) || isClosed(err):
		c.lost(s, err.Error())
		return nil, c.unavailable(err.Error())
	case needsTask(err.Error()):
		return nil, taskUnsupported()
	default:
		// A protocol error: the server refused the call itself (unknown
		// tool, arguments it rejects).
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: firstLine(err.Error(), 500),
			Suggestion: "Check the arguments against the tool's schema and call it again."}
	}
	if res.IsError && needsTask(render(res)) {
		return nil, taskUnsupported()
	}
	if res.IsError {
		return nil, &tools.Error{Code: CodeToolError, Message: firstLine(render(res), tools.MaxErrorMessage),
			Suggestion: "Read the error; fix the arguments or tell the person what failed."}
	}
	return c.media(ctx, remote, res), nil
}

// media is a successful result for the model: its text, with the
// pictures, sounds and files it returned saved to the chat's files and
// named there (files send passes them on to the person), and its
// pictures for a model that reads images.
func (c *Client) media(ctx context.Context, remote string, res *sdk.CallToolResult) any {
	var images []tools.Image
	n := 0
	save := func(kind, mime string, data []byte) string {
		desc := fmt.Sprintf("[%s %s, %d bytes", kind, mime, len(data))
		if c.deps.Save == nil {
			return desc + "]"
		}
		n++
		name, err := c.deps.Save(ctx, fmt.Sprintf("%s-%s-%d%s", c.srv.Name, toolName("x", remote)[2:], n, extension(mime)), data)
		if err != nil {
			c.log.Warn("a file an MCP tool returned could not be saved", "err", err)
			return desc + ", not saved]"
		}
		return desc + ", saved as " + name + "]"
	}
	var parts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *sdk.ImageContent:
			parts = append(parts, save("image", v.MIMEType, v.Data))
			if isPicture(v.MIMEType) && len(v.Data) <= maxPicture {
				images = append(images, tools.Image{MIME: v.MIMEType, Data: v.Data})
			}
		case *sdk.AudioContent:
			parts = append(parts, save("audio", v.MIMEType, v.Data))
		case *sdk.EmbeddedResource:
			if v.Resource != nil && v.Resource.Text == "" && len(v.Resource.Blob) > 0 {
				parts = append(parts, save("resource "+v.Resource.URI, v.Resource.MIMEType, v.Resource.Blob))
				if isPicture(v.Resource.MIMEType) && len(v.Resource.Blob) <= maxPicture {
					images = append(images, tools.Image{MIME: v.Resource.MIMEType, Data: v.Resource.Blob})
				}
				continue
			}
			parts = append(parts, render(&sdk.CallToolResult{Content: []sdk.Content{v}}))
		default:
			parts = append(parts, render(&sdk.CallToolResult{Content: []sdk.Content{v}}))
		}
	}
	text := strings.Join(parts, "\n")
	if len(parts) == 0 {
		text = render(res)
	}
	if len(images) == 0 {
		return text
	}
	return tools.Media{Text: text, Images: images}
}

// maxPicture is the largest picture passed to the model (as for the
// pictures people send); a larger one is only saved and named.
const maxPicture = 5 << 20

// isPicture reports whether a model that reads images takes mime.
func isPicture(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// extension is a file name's ending for mime.
func extension(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/mpeg":
		return ".mp3"
	case "audio/ogg":
		return ".ogg"
	case "application/pdf":
		return ".pdf"
	case "text/plain":
		return ".txt"
	}
	return ".bin"
}

// CodeUnsupported is the code of a call loadout's MCP client cannot make.
const CodeUnsupported = "unsupported"

// needsTask reports whether a server refused a call because the tool
// runs only as a task (the spec's task-augmented tools/call, with
// execution.taskSupport "required"), as the reference servers word it.
func needsTask(text string) bool {
	return strings.Contains(text, "task augmentation") || strings.Contains(text, "taskSupport")
}

// taskUnsupported answers a call to a tool that runs only as a task: the
// SDK (go-sdk v1.8.0) has no tasks, so loadout does not declare them.
func taskUnsupported() *tools.Error {
	return &tools.Error{Code: CodeUnsupported,
		Message:    "This tool runs only as a task (a task-augmented call), which loadout's MCP client does not support yet: its MCP library has no tasks.",
		Suggestion: "Tell the person this tool cannot be used from loadout; use another tool if one fits."}
}

// callState is one call running on the server: the context of the turn
// that made it (its caller and asker), and what the server asked during
// it.
type callState struct {
	ctx context.Context

	mu      sync.Mutex
	asked   int
	refused bool // the person declined a question of this call
}

type callKey struct{}

// admit counts a question of the call, refusing one past
// maxElicitations or after the person declined one.
func (s *callState) admit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.refused:
		return errors.New("the person declined a question of this call already; loadout does not ask again")
	case s.asked >= maxElicitations:
		return fmt.Errorf("one call may ask the person at most %d questions", maxElicitations)
	}
	s.asked++
	return nil
}

func (s *callState) declined() {
	s.mu.Lock()
	s.refused = true
	s.mu.Unlock()
}

// callOf is the call a request of the server belongs to: the one whose
// context it came with (the SDK passes it for requests it fulfils during
// the call), else the one call running. With several running and none
// named, the request is refused rather than answered for the wrong
// person.
func (c *Client) callOf(ctx context.Context) (*callState, error) {
	if s, ok := ctx.Value(callKey{}).(*callState); ok {
		return s, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch len(c.calls) {
	case 0:
		return nil, errors.New("no call of this server is running; loadout answers a server's requests only during a call a person made")
	case 1:
		for s := range c.calls {
			return s, nil
		}
	}
	return nil, errors.New("several calls of this server are running and the request does not say which it belongs to")
}

func isClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection closed") || strings.Contains(s, "EOF") || strings.Contains(s, "broken pipe")
}

// render turns a result's content into text for the model: text as is,
// other kinds described, structured content as JSON when there is no
// text.
func render(res *sdk.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %s]", v.Name, v.URI))
		case *sdk.EmbeddedResource:
			if v.Resource != nil && v.Resource.Text != "" {
				parts = append(parts, v.Resource.Text)
			} else if v.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s, %d bytes]", v.Resource.URI, len(v.Resource.Blob)))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

// toolName is the loadout name of a server's tool: <server>_<tool>, in
// lower case with anything but a-z, 0-9 and _ made _, at most 64 bytes.
func toolName(server, tool string) string {
	var b strings.Builder
	b.WriteString(server)
	b.WriteByte('_')
	for _, r := range strings.ToLower(tool) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()[:min(b.Len(), 64)]
}

// firstLine is s's first line, cut to max characters (never inside one).
func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return tools.Shorten(s, max)
}
