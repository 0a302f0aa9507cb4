package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
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
	for _, c := range a.mcp {
		for _, s := range a.cfg.MCP.Servers {
			if s.Name == c.Name() && s.Auth == mcp.AuthPerson {
				a.router.AddConnector(bridge.Connector{Name: c.Name(), Help: "your account at an MCP service",
					Connect: func(ctx context.Context, in chat.Inbound) (string, error) {
						ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
						defer cancel()
						return c.Connect(ctx, in.UserKey, in.ChatKey)
					},
					Disconnect: func(ctx context.Context, in chat.Inbound) (string, error) { return c.Disconnect(ctx, in.UserKey) }})
			}
		}
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
