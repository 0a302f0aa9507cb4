package mcp

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"loadout/tools"
)

// Sign-in to remote MCP servers (the MCP authorization spec, OAuth 2.1):
// a server with auth: person is used by each person with their own
// token. A call by someone not signed in answers not_connected and
// sends them a sign-in link privately; the authorization server sends
// them back to CallbackPath, where the code is exchanged (PKCE, the
// resource parameter) and the token stored sealed. Each person's calls
// go through a session of their own, opened with their token, so one
// person's token never carries another's call.

// Auth modes of a server (mcp.servers[].auth).
const (
	AuthNone   = ""
	AuthPerson = "person"
	// AuthOperator: one sign-in for everyone, made by the operator from
	// a terminal (`loadout mcp login <server>`), kept with the user key
	// "".
	AuthOperator = "operator"
)

// CallbackPath is where authorization servers send people back, unless
// mcp.redirect_url names another path.
const CallbackPath = "/oauth/mcp/callback"

// signInTTL is how long a sign-in link works.
const signInTTL = 10 * time.Minute

// CodeNotConnected is the code of a call by someone not signed in.
const CodeNotConnected = "not_connected"

// TokenStore keeps people's sealed sign-ins to servers, and the
// sign-ins under way, so that whichever process the authorization server
// sends a person back to finishes theirs. store.DB is one.
type TokenStore interface {
	// MCPToken returns the sealed sign-in, or nil and no error.
	MCPToken(ctx context.Context, server, userKey string) ([]byte, error)
	SaveMCPToken(ctx context.Context, server, userKey string, sealed []byte) error
	DeleteMCPToken(ctx context.Context, server, userKey string) error
	// SaveMCPSignIn keeps a sign-in under way, sealed, by the hash of
	// its state, until expires.
	SaveMCPSignIn(ctx context.Context, id string, sealed []byte, expires time.Time) error
	// TakeMCPSignIn removes and returns a sign-in under way, once; nil
	// when there is none.
	TakeMCPSignIn(ctx context.Context, id string) ([]byte, time.Time, error)
}

// SignInConfig configures SignIns.
type SignInConfig struct {
	// Key is the token key (32 bytes; google.token_key's).
	Key []byte
	// Store keeps the sealed tokens.
	Store TokenStore
	// RedirectURL is loadout's public URL of CallbackPath
	// (mcp.redirect_url).
	RedirectURL string
	// HTTPClient makes the discovery, registration and token requests;
	// its transport should refuse private addresses (the SSRF guard).
	HTTPClient *http.Client
	// Private reports whether a chat is one person's; Notify sends a
	// chat a notice outside its turns (bridge.Hub's).
	Private func(chatKey string) bool
	Notify  func(ctx context.Context, chatKey, text string) error
}

// SignIns are the sign-ins of every server that needs one: the links,
// kept in the store until they come back, and the callback that
// finishes them. Safe for concurrent use.
type SignIns struct {
	cfg  SignInConfig
	aead cipher.AEAD

	mu      sync.Mutex
	clients map[string]*Client // by server name: those a callback finishes
}

// savedToken is what is sealed and stored: the token and what refreshing
// it needs, without discovering the server again.
type savedToken struct {
	Access       string    `json:"access"`
	Refresh      string    `json:"refresh,omitempty"`
	Expiry       time.Time `json:"expiry"`
	TokenURL     string    `json:"token_url"`
	ClientID     string    `json:"client_id"`
	ClientSecret string    `json:"client_secret,omitempty"`
	Resource     string    `json:"resource"`
}

// NewSignIns returns the sign-ins over cfg; an error for a bad key.
func NewSignIns(cfg SignInConfig) (*SignIns, error) {
	if len(cfg.Key) != 32 {
		return nil, errors.New("mcp: signing in to servers needs the 32-byte token key (google.token_key or LOADOUT_TOKEN_KEY)")
	}
	block, err := aes.NewCipher(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("mcp: token key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("mcp: token key: %w", err)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	return &SignIns{cfg: cfg, aead: aead, clients: map[string]*Client{}}, nil
}

// additional is the data a token is sealed with: a sealed token copied to
// another person's or server's row does not open.
func additional(server, user string) []byte { return []byte(server + "\x00" + user) }

func (s *SignIns) seal(server, user string, t savedToken) ([]byte, error) {
	return s.sealJSON(additional(server, user), t)
}

func (s *SignIns) open(server, user string, sealed []byte) (savedToken, error) {
	var t savedToken
	return t, s.openJSON(additional(server, user), sealed, &t)
}

// sealJSON seals v, bound to ad.
func (s *SignIns) sealJSON(ad []byte, v any) ([]byte, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, plain, ad), nil
}

// openJSON opens what sealJSON sealed with ad into v.
func (s *SignIns) openJSON(ad, sealed []byte, v any) error {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return errors.New("mcp: stored token is truncated")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], ad)
	if err != nil {
		return errors.New("mcp: stored token does not decrypt with this token key (was the key changed?)")
	}
	return json.Unmarshal(plain, v)
}

// token is user's stored sign-in to c's server, or ok false.
func (s *SignIns) token(ctx context.Context, c *Client, user string) (savedToken, bool, error) {
	sealed, err := s.cfg.Store.MCPToken(ctx, c.srv.Name, user)
	if err != nil || sealed == nil {
		return savedToken{}, false, err
	}
	t, err := s.open(c.srv.Name, user, sealed)
	if err != nil {
		return savedToken{}, false, err
	}
	return t, true, nil
}

// Disconnect forgets user's sign-in to c's server and ends their session.
// It reports whether there was one.
func (s *SignIns) Disconnect(ctx context.Context, c *Client, user string) (bool, error) {
	_, had, err := s.token(ctx, c, user)
	if err != nil {
		return false, err
	}
	if err := s.cfg.Store.DeleteMCPToken(ctx, c.srv.Name, user); err != nil {
		return false, err
	}
	c.dropPerson(user)
	return had, nil
}

// start makes a sign-in link for user to c's server: the server's 401
// names its protected resource metadata, which names the authorization
// server; loadout registers itself there (or uses client_id), and the
// link carries PKCE's challenge and the resource. Every URL discovered
// must be https (or a loopback address, for a server on the same
// machine) and pass the HTTP client's guard.
func (s *SignIns) start(ctx context.Context, c *Client, user, chatKey string) (string, error) {
	hc := s.cfg.HTTPClient
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL, strings.NewReader(`{}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req) // the configured server itself
	if err != nil {
		return "", fmt.Errorf("reach the server: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", fmt.Errorf("the server answered %s, not a request to sign in", resp.Status)
	}
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	metaURL := ""
	for _, ch := range challenges {
		if v := ch.Params["resource_metadata"]; v != "" {
			metaURL = v
		}
	}
	if metaURL == "" {
		u, _ := url.Parse(c.srv.URL)
		metaURL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/oauth-protected-resource" + u.Path}).String()
	}
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, metaURL, c.srv.URL, hc)
	if err != nil {
		return "", fmt.Errorf("protected resource metadata: %w", err)
	}
	if len(prm.AuthorizationServers) == 0 {
		return "", errors.New("the server names no authorization server")
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], hc)
	if err != nil || asm == nil {
		return "", fmt.Errorf("authorization server metadata: %v", err)
	}
	for _, u := range []string{asm.AuthorizationEndpoint, asm.TokenEndpoint} {
		if err := secureURL(u); err != nil {
			return "", err
		}
	}
	id, secret := c.srv.ClientID, c.srv.ClientSecret
	if id == "" {
		if id, secret, err = c.register(ctx, hc, asm.RegistrationEndpoint, s.cfg.RedirectURL); err != nil {
			return "", err
		}
	}
	cfg := oauth2.Config{ClientID: id, ClientSecret: secret, RedirectURL: s.cfg.RedirectURL, Scopes: c.srv.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint}}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = prm.ScopesSupported
	}
	if secret == "" {
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	verifier, state := oauth2.GenerateVerifier(), rand.Text()
	link := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", prm.Resource))
	s.add(c)
	p := pendingOf(c.srv.Name, user, chatKey, cfg, verifier, prm.Resource, time.Now().Add(signInTTL))
	if err := s.keep(ctx, state, p); err != nil {
		return "", err
	}
	return link, nil
}

// secureURL refuses an endpoint that is not https, unless it is on a
// loopback address (a server on the same machine, as the SDK allows).
func secureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the authorization server gave an unusable URL %q", raw)
	}
	if u.Scheme == "https" {
		return nil
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && (u.Hostname() == "localhost" || ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("the authorization server gave a URL that is not https: %q", raw)
}

// register registers loadout with the authorization server (dynamic
// client registration), once per server while loadout runs.
func (c *Client) register(ctx context.Context, hc *http.Client, endpoint, redirect string) (string, string, error) {
	c.mu.Lock()
	id, secret := c.clientID, c.clientSecret
	c.mu.Unlock()
	if id != "" {
		return id, secret, nil
	}
	if endpoint == "" {
		return "", "", fmt.Errorf("the authorization server has no dynamic registration; set mcp.servers[].client_id for %s", c.srv.Name)
	}
	if err := secureURL(endpoint); err != nil {
		return "", "", err
	}
	r, err := oauthex.RegisterClient(ctx, endpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{redirect}, ClientName: "loadout", TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
	}, hc)
	if err != nil {
		return "", "", fmt.Errorf("register with the authorization server: %w", err)
	}
	c.mu.Lock()
	c.clientID, c.clientSecret = r.ClientID, r.ClientSecret
	c.mu.Unlock()
	return r.ClientID, r.ClientSecret, nil
}

func (s *SignIns) save(ctx context.Context, c *Client, user string, t savedToken) error {
	sealed, err := s.seal(c.srv.Name, user, t)
	if err != nil {
		return err
	}
	return s.cfg.Store.SaveMCPToken(ctx, c.srv.Name, user, sealed)
}

// savingSource refreshes a person's token as oauth2 does and stores each
// new one, so a refresh survives a restart.
type savingSource struct {
	s    *SignIns
	c    *Client
	user string
	src  oauth2.TokenSource
	t    savedToken
	mu   sync.Mutex
}

func (ss *savingSource) Token() (*oauth2.Token, error) {
	tok, err := ss.src.Token()
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if tok.AccessToken != ss.t.Access {
		ss.t.Access, ss.t.Expiry = tok.AccessToken, tok.Expiry
		if tok.RefreshToken != "" {
			ss.t.Refresh = tok.RefreshToken
		}
		if err := ss.s.save(context.Background(), ss.c, ss.user, ss.t); err != nil {
			ss.c.log.Error("MCP sign-in: a refreshed token could not be stored", "err", err)
		}
	}
	return tok, nil
}

// personSession is the caller's own session with a server that needs a
// sign-in: opened with their token the first time, kept while that
// sign-in is stored (a sign-out on any process ends it). Not
// signed in, it answers not_connected and sends them a link privately
// (in a group, it says how to get one).
func (c *Client) personSession(ctx context.Context) (*sdk.ClientSession, error) {
	caller := tools.CallerFrom(ctx)
	user := caller.UserKey
	s := c.deps.SignIns
	if s == nil {
		return nil, &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("The MCP server '%s' needs a sign-in, which is not set up here (mcp.redirect_url and a token key).", c.srv.Name),
			Suggestion: "Tell the person the operator must set up sign-ins first."}
	}
	if user == "" {
		return nil, &tools.Error{Code: CodeNotConnected, Message: fmt.Sprintf("The MCP server '%s' is used with each person's own sign-in, and this call is nobody's.", c.srv.Name)}
	}
	// The stored sign-in is read on every call, even with a session open:
	// the person may have signed out through another process sharing the
	// store, and this process's session must end with it.
	t, ok, err := s.token(ctx, c, user)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	sess := c.people[user]
	c.mu.Unlock()
	switch {
	case sess != nil && ok:
		return sess, nil
	case sess != nil:
		c.dropPerson(user)
	}
	if ok {
		sess, err := c.connectAs(ctx, user, t)
		if err == nil {
			return sess, nil
		}
		if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") && !strings.Contains(err.Error(), "oauth2") {
			return nil, c.unavailable(err.Error())
		}
		// Revoked or no longer refreshable: sign in again.
		c.log.Info("a person's MCP sign-in no longer works; asking them to sign in again", "user", user, "err", err)
	}
	return nil, c.askSignIn(ctx, user, caller.ChatKey)
}

// askSignIn sends user a sign-in link in their private chat, or tells
// them in a group how to get one, and returns the call's error.
func (c *Client) askSignIn(ctx context.Context, user, chatKey string) error {
	s := c.deps.SignIns
	name := c.srv.Name
	te := &tools.Error{Code: CodeNotConnected,
		Suggestion: "Tell the person to sign in, then ask again. Do not try another way."}
	if s.cfg.Private == nil || !s.cfg.Private(chatKey) {
		te.Message = fmt.Sprintf("The person is not signed in to the %s service. Sign-in links are only sent in a private chat: they can send /connect %s to me there.", name, name)
		return te
	}
	link, err := s.start(ctx, c, user, chatKey)
	if err != nil {
		c.log.Warn("MCP sign-in: no link could be made", "err", err)
		return &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("The %s service needs a sign-in, and loadout could not start one: %s", name, firstLine(err.Error(), 300))}
	}
	if s.cfg.Notify != nil {
		text := fmt.Sprintf("To use %s, sign in with this link. It works once, for the next 10 minutes, and only for you — don't share it:\n%s", name, link)
		go s.cfg.Notify(context.WithoutCancel(ctx), chatKey, text)
	}
	te.Message = fmt.Sprintf("The person is not signed in to the %s service; a sign-in link has been sent to them in this private chat.", name)
	return te
}

// Connect is /connect <server>: a sign-in link for the person, in a
// private chat only.
func (c *Client) Connect(ctx context.Context, user, chatKey string) (string, error) {
	s := c.deps.SignIns
	if c.srv.Auth != AuthPerson || s == nil {
		return fmt.Sprintf("The %s service needs no sign-in of yours.", c.srv.Name), nil
	}
	if s.cfg.Private == nil || !s.cfg.Private(chatKey) {
		return fmt.Sprintf("To keep your account safe, I only send sign-in links in a private chat: send /connect %s to me there.", c.srv.Name), nil
	}
	link, err := s.start(ctx, c, user, chatKey)
	if err != nil {
		c.log.Warn("MCP sign-in: no link could be made", "err", err)
		return fmt.Sprintf("Sorry, I couldn't start a sign-in to %s right now.", c.srv.Name), nil
	}
	return fmt.Sprintf("Open this link to sign in to %s. It works once, for the next 10 minutes, and only for you — don't share it:\n%s", c.srv.Name, link), nil
}

// Disconnect is /disconnect <server>.
func (c *Client) Disconnect(ctx context.Context, user string) (string, error) {
	s := c.deps.SignIns
	if c.srv.Auth != AuthPerson || s == nil {
		return fmt.Sprintf("You are not signed in to %s.", c.srv.Name), nil
	}
	had, err := s.Disconnect(ctx, c, user)
	switch {
	case err != nil:
		return "", err
	case !had:
		return fmt.Sprintf("You are not signed in to %s.", c.srv.Name), nil
	}
	return fmt.Sprintf("You're signed out of %s: loadout has forgotten your sign-in.", c.srv.Name), nil
}

// Name is the server's name, as /connect and /disconnect take it.
func (c *Client) Name() string { return c.srv.Name }

// authClient is the HTTP client of user's requests to the server: their
// token on each, refreshed (and stored again) when it expires.
func (c *Client) authClient(user string, t savedToken) *http.Client {
	s := c.deps.SignIns
	cfg := oauth2.Config{ClientID: t.ClientID, ClientSecret: t.ClientSecret, Endpoint: oauth2.Endpoint{TokenURL: t.TokenURL}}
	if t.ClientSecret == "" {
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	rctx := context.WithValue(context.Background(), oauth2.HTTPClient, s.cfg.HTTPClient)
	src := &savingSource{s: s, c: c, user: user, t: t,
		src: cfg.TokenSource(rctx, &oauth2.Token{AccessToken: t.Access, RefreshToken: t.Refresh, Expiry: t.Expiry, TokenType: "Bearer"})}
	return &http.Client{Transport: &oauth2.Transport{Source: src, Base: headers{c.srv.Headers, http.DefaultTransport}}}
}

// operatorClient is the HTTP client of a server with auth: operator: the
// operator's sign-in, or an error saying how to make one.
func (c *Client) operatorClient(ctx context.Context) (*http.Client, error) {
	s := c.deps.SignIns
	if s == nil {
		return nil, errors.New("sign-ins are not set up (a token key is needed)")
	}
	t, ok, err := s.token(ctx, c, "")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("not signed in: run `loadout mcp login %s` from a terminal", c.srv.Name)
	}
	return c.authClient("", t), nil
}

// connectAs opens user's session with the server, with their token.
func (c *Client) connectAs(ctx context.Context, user string, t savedToken) (*sdk.ClientSession, error) {
	hc := c.authClient(user, t)
	sess, err := c.newClient().Connect(ctx, &sdk.StreamableClientTransport{Endpoint: c.srv.URL, MaxRetries: -1, HTTPClient: hc}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c.mu.Lock()
	if old := c.people[user]; old != nil {
		c.mu.Unlock()
		sess.Close()
		return old, nil
	}
	c.people[user] = sess
	c.mu.Unlock()
	return sess, nil
}

// dropPerson closes user's session, if any: after a new sign-in or a
// sign-out, the next call opens one with the token stored now.
func (c *Client) dropPerson(user string) {
	c.mu.Lock()
	sess := c.people[user]
	delete(c.people, user)
	c.mu.Unlock()
	if sess != nil {
		sess.Close()
	}
}
