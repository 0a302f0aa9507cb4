// Package mcp makes each configured MCP server a tool group, mcp_<name>,
// through the official Go SDK. A server's tools are listed once at start
// (or, when it cannot be reached then, on the group's first load) and
// cached; calls go through loadout's executor like any tool. A server that
// stops is restarted with backoff, and its calls meanwhile answer
// unavailable.
package mcp

import (
	"context"
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
	"loadout/tools"
)

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
