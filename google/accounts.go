package google

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/api/option"

	"loadout/tools"
)

// Google's OAuth endpoints, used when Config leaves them empty.
const (
	DefaultAuthURL   = "https://accounts.google.com/o/oauth2/auth"
	DefaultTokenURL  = "https://oauth2.googleapis.com/token"
	DefaultRevokeURL = "https://oauth2.googleapis.com/revoke"
)

// StateTTL is how long a connect link stays valid.
const StateTTL = 10 * time.Minute

// TokenStore keeps each person's sealed (encrypted) Google account. The
// store never sees a token in clear.
type TokenStore interface {
	// GoogleToken returns the sealed account of userKey, or nil and no
	// error when there is none.
	GoogleToken(ctx context.Context, userKey string) ([]byte, error)
	// SaveGoogleToken stores (replacing) the sealed account of userKey.
	SaveGoogleToken(ctx context.Context, userKey string, sealed []byte) error
	// DeleteGoogleToken removes the account of userKey; no error if none.
	DeleteGoogleToken(ctx context.Context, userKey string) error
}

// StateStore keeps pending connect links (sealed) so they survive a
// restart; a TokenStore that is one is used for them, else they live in
// memory.
type StateStore interface {
	// SaveGoogleState stores a link's sealed state until expires.
	SaveGoogleState(ctx context.Context, state string, sealed []byte, expires time.Time) error
	// TakeGoogleState removes and returns a link's sealed state, or nil
	// when there is none (never issued, or taken already).
	TakeGoogleState(ctx context.Context, state string) ([]byte, time.Time, error)
}

// Config configures Accounts. Zero values are the documented defaults.
type Config struct {
	// ClientID and ClientSecret identify the OAuth client (required).
	ClientID     string
	ClientSecret string
	// RedirectURL is the callback of /connect google, e.g.
	// https://bot.example.com/oauth/google/callback.
	RedirectURL string
	// Scopes are requested when a person connects: the union of the
	// registered groups' scopes.
	Scopes []string
	// Key is the 32-byte AES-256-GCM key tokens are sealed with (required).
	Key []byte
	// Store keeps the sealed tokens (required).
	Store TokenStore
	// Endpoint, when set, is the base URL every Workspace API client talks
	// to (tests and proxies); see EndpointOption.
	Endpoint string
	// AuthURL, TokenURL and RevokeURL override Google's OAuth endpoints.
	AuthURL   string
	TokenURL  string
	RevokeURL string
	// HTTPClient makes OAuth and API requests; nil means
	// http.DefaultClient. Its Transport is the base of API clients.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger logs refresh and revoke problems; nil discards.
	Logger *slog.Logger
}

// Accounts is the google.Client of loadout: it keeps each person's OAuth
// token encrypted in a TokenStore, runs the connect flows, and hands out
// API client options acting as the calling person. It is safe for
// concurrent use.
type Accounts struct {
	cfg    Config
	oauth  oauth2.Config
	sealer sealer

	mu     sync.Mutex
	states map[string]pending
}

var _ Client = (*Accounts)(nil)

// pending is a connect link that has not come back yet.
type pending struct {
	UserKey     string    `json:"user"`
	ChatKey     string    `json:"chat"`
	Verifier    string    `json:"verifier"`
	RedirectURL string    `json:"redirect"`
	Expires     time.Time `json:"expires"`
}

// account is what is sealed and stored per person.
type account struct {
	// Email is the Google account's address, from the sign-in's ID token.
	Email        string        `json:"email,omitempty"`
	Token        *oauth2.Token `json:"token,omitempty"`
	Scopes       []string      `json:"scopes"`
	Disconnected bool          `json:"disconnected,omitempty"`
	ConnectedAt  time.Time     `json:"connected_at"`
}

// Connection says whose account a finished connect flow stored and which
// chat asked for it.
type Connection struct {
	UserKey string
	ChatKey string
	Scopes  []string
	// Email is the connected account's address ("" if Google did not
	// say).
	Email string
}

// Errors of the connect flow.
var (
	// ErrUnknownState means the link's state is wrong or was already used.
	ErrUnknownState = errors.New("google: unknown or already used connect link")
	// ErrStateExpired means the link is older than StateTTL.
	ErrStateExpired = errors.New("google: connect link expired")
	// ErrNotConnected means the person has no stored account.
	ErrNotConnected = errors.New("google: no account connected")
	// ErrRevokeFailed means Google could not be told to revoke a token
	// (the token is deleted locally all the same).
	ErrRevokeFailed = errors.New("google: revoke failed")
)

// New checks cfg and returns Accounts.
func New(cfg Config) (*Accounts, error) {
	if cfg.ClientID == "" {
		return nil, errors.New("google: client id is empty: set google.client_id and google.client_secret, or google.credentials_file")
	}
	if cfg.Store == nil {
		return nil, errors.New("google: no token store")
	}
	if len(cfg.Key) == 0 {
		return nil, ErrNoKey
	}
	s, err := newSealer(cfg.Key)
	if err != nil {
		return nil, err
	}
	if cfg.AuthURL == "" {
		cfg.AuthURL = DefaultAuthURL
	}
	if cfg.TokenURL == "" {
		cfg.TokenURL = DefaultTokenURL
	}
	if cfg.RevokeURL == "" {
		cfg.RevokeURL = DefaultRevokeURL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// openid and email make Google say which account was connected.
	cfg.Scopes = uniqueSorted(append(slices.Clone(cfg.Scopes), "openid", "email"))
	return &Accounts{
		cfg: cfg,
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Scopes:   cfg.Scopes,
			Endpoint: oauth2.Endpoint{AuthURL: cfg.AuthURL, TokenURL: cfg.TokenURL, AuthStyle: oauth2.AuthStyleInParams},
		},
		sealer: s,
		states: map[string]pending{},
	}, nil
}

// Scopes returns the scopes requested when a person connects.
func (a *Accounts) Scopes() []string { return slices.Clone(a.cfg.Scopes) }

// AuthURL starts a connect flow for userKey, asked for in chatKey, and
// returns the link to Google's consent page. The link's state is random,
// single-use, valid for StateTTL and bound to userKey; PKCE protects the
// code exchange.
func (a *Accounts) AuthURL(userKey, chatKey string) (string, error) {
	return a.start(userKey, chatKey, a.cfg.RedirectURL)
}

func (a *Accounts) start(userKey, chatKey, redirectURL string) (string, error) {
	if userKey == "" {
		return "", errors.New("google: connect needs a user")
	}
	if redirectURL == "" {
		return "", errors.New("google: no redirect URL: set google.redirect_url")
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("google: state: %w", err)
	}
	state := base64.RawURLEncoding.EncodeToString(b)
	verifier := oauth2.GenerateVerifier()
	now := a.cfg.Now()
	p := pending{UserKey: userKey, ChatKey: chatKey, Verifier: verifier, RedirectURL: redirectURL, Expires: now.Add(StateTTL)}
	if err := a.keep(state, p); err != nil {
		return "", err
	}
	conf := a.oauth
	conf.RedirectURL = redirectURL
	return conf.AuthCodeURL(state, oauth2.AccessTypeOffline, oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("prompt", "consent"),
		oauth2.SetAuthURLParam("include_granted_scopes", "true")), nil
}

// take removes state and returns what it was issued for. A state is
// consumed even when it has expired.
func (a *Accounts) take(state string) (pending, error) {
	if state == "" {
		return pending{}, ErrUnknownState
	}
	var p pending
	if ss, ok := a.cfg.Store.(StateStore); ok {
		sealed, _, err := ss.TakeGoogleState(context.Background(), state)
		if err != nil {
			return pending{}, fmt.Errorf("google: read the connect link: %w", err)
		}
		if sealed == nil {
			return pending{}, ErrUnknownState
		}
		plain, err := a.sealer.open(stateAD+state, sealed)
		if err == nil {
			err = json.Unmarshal(plain, &p)
		}
		if err != nil {
			return pending{}, ErrUnknownState
		}
	} else {
		a.mu.Lock()
		var ok bool
		p, ok = a.states[state]
		delete(a.states, state)
		a.mu.Unlock()
		if !ok {
			return pending{}, ErrUnknownState
		}
	}
	if a.cfg.Now().After(p.Expires) {
		return pending{}, ErrStateExpired
	}
	return p, nil
}

// stateAD binds a sealed link to its state, so one link's record cannot
// stand in for another's.
const stateAD = "state:"

// keep stores a pending link: sealed in the store when it keeps them,
// else in memory (expired ones are dropped as new ones come).
func (a *Accounts) keep(state string, p pending) error {
	if ss, ok := a.cfg.Store.(StateStore); ok {
		plain, _ := json.Marshal(p) // strings and a time always encode
		sealed, err := a.sealer.seal(stateAD+state, plain)
		if err != nil {
			return err
		}
		if err := ss.SaveGoogleState(context.Background(), state, sealed, p.Expires); err != nil {
			return fmt.Errorf("google: store the connect link: %w", err)
		}
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	for s, old := range a.states {
		if now.After(old.Expires) {
			delete(a.states, s)
		}
	}
	a.states[state] = p
	return nil
}

// Cancel consumes state after Google reported an error (the person
// declined); it returns the flow's connection details.
func (a *Accounts) Cancel(state string) (Connection, error) {
	p, err := a.take(state)
	return Connection{UserKey: p.UserKey, ChatKey: p.ChatKey}, err
}

// Finish completes a connect flow: it checks and consumes state, exchanges
// code (with the PKCE verifier) and stores the sealed token for the person
// the state was issued to. It returns ErrUnknownState or ErrStateExpired
// for a bad state.
func (a *Accounts) Finish(ctx context.Context, state, code string) (Connection, error) {
	p, err := a.take(state)
	if err != nil {
		return Connection{}, err
	}
	conf := a.oauth
	conf.RedirectURL = p.RedirectURL
	tok, err := conf.Exchange(a.httpContext(ctx), code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		return Connection{}, fmt.Errorf("google: exchange code: %w", err)
	}
	scopes := a.cfg.Scopes
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		scopes = uniqueSorted(strings.Fields(s))
	}
	email := idTokenEmail(tok)
	acct := account{Email: email, Token: stripExtra(tok), Scopes: scopes, ConnectedAt: a.cfg.Now().UTC()}
	if err := a.save(ctx, p.UserKey, acct); err != nil {
		return Connection{}, err
	}
	return Connection{UserKey: p.UserKey, ChatKey: p.ChatKey, Scopes: scopes, Email: email}, nil
}

// idTokenEmail is the email claim of the ID token that came with tok from
// Google's token endpoint (over TLS, from Google itself, so its payload is
// read without checking the signature); "" when there is none.
func idTokenEmail(tok *oauth2.Token) string {
	raw, _ := tok.Extra("id_token").(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var claims struct {
		Email string `json:"email"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Email
}

// Account says which Google account userKey connected ("" when none is,
// or Google did not say) and when.
func (a *Accounts) Account(ctx context.Context, userKey string) (email string, connected bool, at time.Time, err error) {
	acct, ok, err := a.load(ctx, userKey)
	if err != nil || !ok || acct.Disconnected {
		return "", false, time.Time{}, err
	}
	return acct.Email, true, acct.ConnectedAt, nil
}

// Connected reports whether userKey has a usable account.
func (a *Accounts) Connected(ctx context.Context, userKey string) (bool, error) {
	acct, ok, err := a.load(ctx, userKey)
	return ok && !acct.Disconnected, err
}

// Disconnect revokes userKey's grant at Google and deletes the stored
// token. It returns ErrNotConnected when nothing is stored. The token is
// deleted even when revoking fails; that error is returned after.
func (a *Accounts) Disconnect(ctx context.Context, userKey string) error {
	acct, ok, err := a.load(ctx, userKey)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotConnected
	}
	var revokeErr error
	if acct.Token != nil {
		t := acct.Token.RefreshToken
		if t == "" {
			t = acct.Token.AccessToken
		}
		revokeErr = a.revoke(ctx, t)
	}
	if err := a.cfg.Store.DeleteGoogleToken(ctx, userKey); err != nil {
		return fmt.Errorf("google: delete token: %w", err)
	}
	return revokeErr
}

func (a *Accounts) revoke(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.RevokeURL, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRevokeFailed, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRevokeFailed, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	// 400 invalid_token: already revoked or expired, which is what we want.
	if res.StatusCode == http.StatusOK || (res.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "invalid_token")) {
		return nil
	}
	return fmt.Errorf("%w: status %d", ErrRevokeFailed, res.StatusCode)
}

// Options implements Client: options for a Google API service acting as
// tools.CallerFrom(ctx).UserKey, with a token that is refreshed as needed
// and saved when it changes. It returns NotConnected when the person has
// no account, Google refused to refresh it, or it lacks svc.Scopes.
func (a *Accounts) Options(ctx context.Context, svc Service) ([]option.ClientOption, error) {
	user := tools.CallerFrom(ctx).UserKey
	if user == "" {
		return nil, NotConnected(" (no person is known for this call)")
	}
	au, err := tools.PerTurn(ctx, "google.account "+user, func() (authorised, error) { return a.authorise(ctx, user) })
	if err != nil {
		return nil, err
	}
	for _, s := range svc.Scopes {
		if !slices.Contains(au.scopes, s) {
			// Unticked on the consent screen, or the group was turned on
			// after the person connected: asking again adds it
			// (include_granted_scopes keeps what was granted).
			group := svc.Group
			if group == "" {
				group = "this tool group"
			}
			return nil, &tools.Error{
				Code:       tools.CodePermission,
				Message:    fmt.Sprintf("The person's Google account has not granted %s the permission it needs (%s).", group, s),
				Suggestion: "Ask the person to send /connect google again in a private chat and allow what it asks for, then try again.",
				Details:    map[string]any{"group": group, "scope": s},
			}
		}
	}
	opts := []option.ClientOption{option.WithHTTPClient(au.client)}
	if e := EndpointOption(a.cfg.Endpoint, svc); e != nil {
		opts = append(opts, e)
	}
	return opts, nil
}

// authorised is a person's account, read and decrypted, with the HTTP
// client that signs requests with its token (renewing and saving it):
// made once per turn and shared by the turn's calls.
type authorised struct {
	scopes []string
	client *http.Client
}

// authorise reads user's account and builds its client. It outlives the
// call that made it, so it keeps none of that call's deadline.
func (a *Accounts) authorise(ctx context.Context, user string) (authorised, error) {
	acct, ok, err := a.load(ctx, user)
	if err != nil {
		return authorised{}, err
	}
	if ok && acct.Disconnected {
		return authorised{}, expired()
	}
	if !ok || acct.Token == nil {
		return authorised{}, NotConnected("")
	}
	ctx = context.WithoutCancel(ctx)
	src := &savingSource{a: a, ctx: ctx, user: user, acct: acct, last: acct.Token.AccessToken}
	src.src = a.oauth.TokenSource(a.httpContext(ctx), acct.Token)
	base := a.cfg.HTTPClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return authorised{scopes: acct.Scopes, client: &http.Client{Transport: &oauth2.Transport{Source: src, Base: base}}}, nil
}

// expired is the error once Google refused to renew an account's access
// (invalid_grant): revoked, a changed password, or the 7-day limit of apps
// in Google's Testing publishing status.
func expired() *tools.Error {
	e := NotConnected(" any more: Google refused to renew its access")
	e.Suggestion = "Ask the person to send /connect google again in a private chat. If this happens every week, the owner's Google OAuth app is in Testing status, whose sign-ins last 7 days (see docs/google.md)."
	return e
}

// savingSource persists a token when the wrapped source refreshed it, and
// marks the account disconnected when Google refuses the refresh token.
type savingSource struct {
	a    *Accounts
	ctx  context.Context
	user string
	src  oauth2.TokenSource

	mu   sync.Mutex
	acct account
	last string
}

func (s *savingSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, err := s.src.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			s.acct.Disconnected = true
			s.acct.Token = nil
			if serr := s.a.save(s.ctx, s.user, s.acct); serr != nil {
				s.a.cfg.Logger.Error("google: mark account disconnected", "user", s.user, "err", serr)
			}
			s.a.cfg.Logger.Warn("google: refresh refused, account marked disconnected", "user", s.user)
			return nil, expired()
		}
		return nil, fmt.Errorf("google: refresh token: %w", err)
	}
	if tok.AccessToken != s.last {
		s.acct.Token = stripExtra(tok)
		if err := s.a.save(s.ctx, s.user, s.acct); err != nil {
			s.a.cfg.Logger.Error("google: save refreshed token", "user", s.user, "err", err)
		}
		s.last = tok.AccessToken
	}
	return tok, nil
}

func (a *Accounts) load(ctx context.Context, user string) (account, bool, error) {
	sealed, err := a.cfg.Store.GoogleToken(ctx, user)
	if err != nil {
		return account{}, false, fmt.Errorf("google: load token: %w", err)
	}
	if sealed == nil {
		return account{}, false, nil
	}
	plain, err := a.sealer.open(user, sealed)
	if err != nil {
		return account{}, false, err
	}
	var acct account
	if err := json.Unmarshal(plain, &acct); err != nil {
		return account{}, false, fmt.Errorf("google: decode stored token: %w", err)
	}
	return acct, true, nil
}

func (a *Accounts) save(ctx context.Context, user string, acct account) error {
	plain, err := json.Marshal(acct)
	if err != nil {
		return fmt.Errorf("google: encode token: %w", err)
	}
	sealed, err := a.sealer.seal(user, plain)
	if err != nil {
		return err
	}
	if err := a.cfg.Store.SaveGoogleToken(ctx, user, sealed); err != nil {
		return fmt.Errorf("google: save token: %w", err)
	}
	return nil
}

func (a *Accounts) httpContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, a.cfg.HTTPClient)
}

// stripExtra keeps only the fields of tok that are stored.
func stripExtra(tok *oauth2.Token) *oauth2.Token {
	return &oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
}

func uniqueSorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// Endpoint returns the API base URL override, "" for Google's own.
func (a *Accounts) Endpoint() string { return a.cfg.Endpoint }
