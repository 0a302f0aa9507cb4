package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/google"
	"loadout/settings"
	"loadout/store"
	"loadout/tools/mcp"
)

// The store keeps people's MCP sign-ins, and the sign-ins under way, so
// that an authorization server may send a person back to any process
// sharing it.
var _ mcp.TokenStore = (*store.DB)(nil)

// mcpSignIns makes the sign-ins of the MCP servers with auth: person:
// tokens sealed with the Google token key, in the store; discovery and
// token requests through client (the SSRF guard's); links and notices
// through the hub. Nil when no server signs people in.
func (a *app) mcpSignIns(client *http.Client) (*mcp.SignIns, error) {
	if !a.cfg.MCP.NeedsSignIn() {
		return nil, nil
	}
	key, err := google.ParseKey(a.cfg.Google.TokenKey)
	if err != nil {
		return nil, fmt.Errorf("mcp.servers: a server with auth: person stores each person's sign-in encrypted with the token key: %w", err)
	}
	return mcp.NewSignIns(mcp.SignInConfig{Key: key, Store: a.db, RedirectURL: a.cfg.MCP.RedirectURL, HTTPClient: client,
		Private: a.hub.Private, Notify: a.hub.Notify})
}

// wireMCPSignIns serves the sign-in callback and adds the MCP servers to
// /connect and /disconnect (which Google's also answer): /connect
// <server> sends a sign-in link in a private chat, /disconnect <server>
// forgets the person's sign-in. Call it after Google's commands.
func (a *app) wireMCPSignIns() {
	if a.signIns == nil {
		return
	}
	path := mcp.CallbackPath
	if u, err := url.Parse(a.cfg.MCP.RedirectURL); err == nil && u.Path != "" {
		path = u.Path
	}
	a.mux.Handle("GET "+path, a.signIns)
	servers := map[string]*mcp.Client{}
	var names []string
	for _, c := range a.mcp {
		for _, s := range a.cfg.MCP.Servers {
			if s.Name == c.Name() && s.Auth == mcp.AuthPerson {
				servers[c.Name()] = c
				names = append(names, c.Name())
			}
		}
	}
	prev := map[string]bridge.Command{}
	for _, c := range a.router.Commands() {
		prev[c.Name] = c
	}
	for _, name := range []string{"connect", "disconnect"} {
		before := prev[name]
		args := strings.Join(append([]string{"google"}, names...), "|")
		a.router.Register(bridge.Command{Name: name, Args: args, Help: name + " your Google account or your account at an MCP service",
			Run: func(ctx context.Context, in chat.Inbound, arg string) (string, error) {
				c, ok := servers[strings.ToLower(strings.TrimSpace(arg))]
				switch {
				case ok && name == "connect":
					ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					return c.Connect(ctx, in.UserKey, in.ChatKey)
				case ok:
					return c.Disconnect(ctx, in.UserKey)
				case before.Run != nil:
					return before.Run(ctx, in, arg)
				}
				return fmt.Sprintf("Usage: /%s %s", name, args), nil
			}})
	}
}

// mcpLogin runs `loadout mcp login <server>` (mcp.OperatorLogin): the
// token is stored sealed with the token key, where `loadout serve` finds
// it.
func mcpLogin(ctx context.Context, cfg settings.Config, log *slog.Logger, name string, out io.Writer) error {
	i := slices.IndexFunc(cfg.MCP.Servers, func(s mcp.Server) bool { return s.Name == name })
	switch {
	case i < 0:
		return fmt.Errorf("mcp login: no server %q in mcp.servers", name)
	case cfg.MCP.Servers[i].Auth != mcp.AuthOperator:
		return fmt.Errorf("mcp login: the server %q is not signed in by the operator (mcp.servers[].auth: operator)", name)
	}
	key, err := google.ParseKey(cfg.Google.TokenKey)
	if err != nil {
		return fmt.Errorf("mcp login: the sign-in is stored encrypted with the token key: %w", err)
	}
	db, err := cfg.Store.Open()
	if err != nil {
		return err
	}
	defer db.Close()
	return mcp.OperatorLogin(ctx, cfg.MCP.Servers[i], key, db, log, out)
}
