package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"time"

	"golang.org/x/oauth2"
)

// A sign-in under way is kept in the store, sealed with the token key
// (it holds PKCE's verifier and the client's secret) and bound to its
// state, by the state's hash: the authorization server may send the
// person back to any process sharing the store, and the first to take
// it finishes it, once.

// pendingSignIn is a sign-in link that has not come back yet: what the
// callback needs to exchange its code and store the token.
type pendingSignIn struct {
	Server       string           `json:"server"`
	User         string           `json:"user"`
	ChatKey      string           `json:"chat,omitempty"`
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	AuthURL      string           `json:"auth_url"`
	TokenURL     string           `json:"token_url"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style,omitempty"`
	RedirectURL  string           `json:"redirect_url"`
	Scopes       []string         `json:"scopes,omitempty"`
	Verifier     string           `json:"verifier"`
	Resource     string           `json:"resource"`
	Expires      time.Time        `json:"expires"`
}

func pendingOf(server, user, chatKey string, cfg oauth2.Config, verifier, resource string, expires time.Time) pendingSignIn {
	return pendingSignIn{Server: server, User: user, ChatKey: chatKey, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		AuthURL: cfg.Endpoint.AuthURL, TokenURL: cfg.Endpoint.TokenURL, AuthStyle: cfg.Endpoint.AuthStyle, RedirectURL: cfg.RedirectURL,
		Scopes: cfg.Scopes, Verifier: verifier, Resource: resource, Expires: expires}
}

// config is the OAuth configuration the link was made with.
func (p pendingSignIn) config() oauth2.Config {
	return oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: p.RedirectURL, Scopes: p.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthURL, TokenURL: p.TokenURL, AuthStyle: p.AuthStyle}}
}

// stateID is how the store names a sign-in under way: its state's hash.
func stateID(state string) string {
	h := sha256.Sum256([]byte(state))
	return hex.EncodeToString(h[:])
}

// stateAD binds a sealed sign-in to its state: one link's record copied
// under another's does not open.
func stateAD(state string) []byte { return []byte("sign-in\x00" + state) }

// keep stores p until it expires.
func (s *SignIns) keep(ctx context.Context, state string, p pendingSignIn) error {
	sealed, err := s.sealJSON(stateAD(state), p)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.SaveMCPSignIn(ctx, stateID(state), sealed, p.Expires); err != nil {
		return fmt.Errorf("keep the sign-in: %w", err)
	}
	return nil
}

// take removes the sign-in of state from the store and returns it with
// its server's client; ok false when it is unknown, used, expired, or
// for a server this process does not have.
func (s *SignIns) take(ctx context.Context, state string) (pendingSignIn, *Client, bool, error) {
	var p pendingSignIn
	if state == "" {
		return p, nil, false, nil
	}
	sealed, _, err := s.cfg.Store.TakeMCPSignIn(ctx, stateID(state))
	if err != nil || sealed == nil {
		return p, nil, false, err
	}
	if err := s.openJSON(stateAD(state), sealed, &p); err != nil {
		return p, nil, false, nil
	}
	s.mu.Lock()
	c := s.clients[p.Server]
	s.mu.Unlock()
	return p, c, c != nil && time.Now().Before(p.Expires), nil
}

// add makes c's sign-ins finishable here: every client of a server with
// auth: person is added when it is made, so a callback finishes a link
// another process made.
func (s *SignIns) add(c *Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[c.srv.Name] = c
}

// ServeHTTP finishes a sign-in: the authorization server sends the
// person back here (to any process sharing the store) with the link's
// state and a code, exchanged for a token (with PKCE's verifier and the
// resource), which is stored sealed for that person and server. A state
// that is unknown, used or expired is refused.
func (s *SignIns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := func(code int, text string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(code)
		fmt.Fprintf(w, "<!doctype html><title>loadout</title><p>%s</p>", html.EscapeString(text))
	}
	p, c, ok, err := s.take(r.Context(), q.Get("state"))
	switch {
	case err != nil:
		page(http.StatusInternalServerError, "loadout could not read this sign-in. Please try again later.")
		return
	case !ok:
		page(http.StatusBadRequest, "This sign-in link is unknown, used or expired. Ask loadout for a new one.")
		return
	case q.Get("error") != "" || q.Get("code") == "":
		page(http.StatusBadRequest, "The sign-in was not completed.")
		return
	}
	cfg := p.config()
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, s.cfg.HTTPClient)
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource))
	if err != nil {
		c.log.Warn("MCP sign-in: the code exchange failed", "err", err)
		page(http.StatusBadGateway, "The service did not accept the sign-in. Ask loadout for a new link.")
		return
	}
	st := savedToken{Access: tok.AccessToken, Refresh: tok.RefreshToken, Expiry: tok.Expiry, TokenURL: cfg.Endpoint.TokenURL,
		ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Resource: p.Resource}
	if err := s.save(r.Context(), c, p.User, st); err != nil {
		c.log.Error("MCP sign-in: the token could not be stored", "err", err)
		page(http.StatusInternalServerError, "Signed in, but loadout could not keep the sign-in. Please try again later.")
		return
	}
	c.dropPerson(p.User)
	name := c.srv.Name
	c.log.Info("a person signed in to an MCP server", "user", p.User)
	page(http.StatusOK, "Signed in to "+name+". You can close this page and go back to the chat.")
	if s.cfg.Notify != nil && p.ChatKey != "" {
		go s.cfg.Notify(context.Background(), p.ChatKey, "You're signed in to "+name+". Ask me again and I'll use it.")
	}
}
