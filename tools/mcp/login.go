package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// loginTimeout bounds an operator's sign-in.
const loginTimeout = 10 * time.Minute

// OperatorLogin is `loadout mcp login <server>`: the operator signs in
// to srv (auth: operator) for everyone, through a callback served on a
// loopback port of this machine; the token is stored in store, sealed
// with key, where the serving processes find it.
func OperatorLogin(ctx context.Context, srv Server, key []byte, store TokenStore, log *slog.Logger, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("mcp login: listen for the sign-in's return: %w", err)
	}
	s, err := NewSignIns(SignInConfig{Key: key, Store: store, RedirectURL: "http://" + ln.Addr().String() + CallbackPath})
	if err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+CallbackPath, s)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	return New(srv, Deps{}, log).Login(ctx, s, out)
}

// Login is `loadout mcp login <server>` for a server with auth:
// operator: it prints a sign-in link to out, waits (until ctx ends) for
// the authorization server to send the browser back to s's callback,
// which the caller serves at s's redirect URL, and reports when the
// operator's token is stored.
func (c *Client) Login(ctx context.Context, s *SignIns, out io.Writer) error {
	if c.srv.Auth != AuthOperator {
		return fmt.Errorf("the MCP server %s is not signed in by the operator (auth: operator)", c.srv.Name)
	}
	c.deps.SignIns = s
	link, err := s.start(ctx, c, "", "")
	if err != nil {
		return fmt.Errorf("start a sign-in to %s: %w", c.srv.Name, err)
	}
	fmt.Fprintf(out, "Open this link in a browser on this machine to sign in to %s for everyone:\n%s\n", c.srv.Name, link)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sign-in to %s was not finished: %w", c.srv.Name, ctx.Err())
		case <-tick.C:
		}
		if _, ok, err := s.token(ctx, c, ""); err != nil {
			return err
		} else if ok {
			fmt.Fprintf(out, "Signed in to %s.\n", c.srv.Name)
			return nil
		}
	}
}
