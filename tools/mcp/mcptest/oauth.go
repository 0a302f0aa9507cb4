package mcptest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuth is a remote MCP server behind an OAuth 2.1 authorization server,
// as the MCP authorization spec has them, in one httptest server: the
// protected resource's metadata, the authorization server's metadata,
// dynamic client registration, an authorization endpoint that signs in
// whoever the test says, a token endpoint that checks PKCE, the client,
// the redirect and the resource, and refreshes; and /mcp, which needs a
// bearer token and whose tool whoami answers whom the token is for.
type OAuth struct {
	*httptest.Server
	// TokenTTL is how long an access token lasts; default an hour.
	TokenTTL time.Duration

	mu        sync.Mutex
	clients   map[string]string // client id → redirect URI
	codes     map[string]grant
	access    map[string]tokenInfo
	refresh   map[string]string // refresh token → user
	next      int
	Refreshs  int // refresh grants served
	Exchanges int
}

type grant struct {
	user, client, redirect, challenge, resource string
}

type tokenInfo struct {
	user    string
	expires time.Time
}

// WhoAmI is the tool of the fake's MCP server.
const WhoAmI = "whoami"

// NewOAuth starts the fake; it stops when the test ends.
func NewOAuth(t testing.TB) *OAuth {
	o := &OAuth{TokenTTL: time.Hour, clients: map[string]string{}, codes: map[string]grant{},
		access: map[string]tokenInfo{}, refresh: map[string]string{}}
	mux := http.NewServeMux()
	o.Server = httptest.NewServer(mux)
	t.Cleanup(o.Close)
	mux.Handle("GET /.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: o.URL + "/mcp", AuthorizationServers: []string{o.URL}, ScopesSupported: []string{"notes"}}))
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": o.URL, "authorization_endpoint": o.URL + "/authorize", "token_endpoint": o.URL + "/token",
			"registration_endpoint": o.URL + "/register", "code_challenge_methods_supported": []string{"S256"},
			"response_types_supported": []string{"code"}, "grant_types_supported": []string{"authorization_code", "refresh_token"}})
	})
	mux.HandleFunc("POST /register", o.register)
	mux.HandleFunc("GET /authorize", o.authorize)
	mux.HandleFunc("POST /token", o.token)
	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		ti, ok := o.access[tok]
		if !ok || time.Now().After(ti.expires) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: ti.user, Expiration: ti.expires}, nil
	}
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, &sdk.ServerOptions{Instructions: "Notes behind a sign-in."})
		sdk.AddTool(s, &sdk.Tool{Name: WhoAmI, Description: "Say whom the token is for", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
				return text("you are " + req.Extra.TokenInfo.UserID), nil, nil
			})
		return s
	}, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: o.URL + "/.well-known/oauth-protected-resource/mcp"})(mcpHandler))
	return o
}

// MCPURL is the MCP endpoint.
func (o *OAuth) MCPURL() string { return o.URL + "/mcp" }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (o *OAuth) register(w http.ResponseWriter, r *http.Request) {
	var m oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) != 1 {
		http.Error(w, `{"error":"invalid_client_metadata"}`, http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.next++
	id := fmt.Sprintf("client-%d", o.next)
	o.clients[id] = m.RedirectURIs[0]
	o.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none"})
}

// authorize signs in the person named by the "login" parameter the test
// adds to the link (what a real server's sign-in page would establish)
// and redirects with a code.
func (o *OAuth) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o.mu.Lock()
	redirect, ok := o.clients[q.Get("client_id")]
	o.mu.Unlock()
	switch {
	case !ok || redirect != q.Get("redirect_uri"):
		http.Error(w, "unknown client or redirect", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE is required", http.StatusBadRequest)
		return
	case q.Get("resource") != o.MCPURL():
		http.Error(w, "wrong resource", http.StatusBadRequest)
		return
	case q.Get("login") == "":
		http.Error(w, "nobody signed in", http.StatusUnauthorized)
		return
	}
	code := "code-" + randomish(q.Get("state"))
	o.mu.Lock()
	o.codes[code] = grant{user: q.Get("login"), client: q.Get("client_id"), redirect: redirect, challenge: q.Get("code_challenge"), resource: q.Get("resource")}
	o.mu.Unlock()
	u, _ := url.Parse(redirect)
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func randomish(seed string) string {
	sum := sha256.Sum256([]byte(seed + time.Now().String()))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

func (o *OAuth) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	f := r.PostForm
	fail := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":%q}`, code)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var user string
	switch f.Get("grant_type") {
	case "authorization_code":
		g, ok := o.codes[f.Get("code")]
		delete(o.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case !ok:
			fail("invalid_grant")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			fail("invalid_grant") // PKCE
			return
		case f.Get("client_id") != g.client || f.Get("redirect_uri") != g.redirect || f.Get("resource") != g.resource:
			fail("invalid_grant")
			return
		}
		user = g.user
		o.Exchanges++
	case "refresh_token":
		u, ok := o.refresh[f.Get("refresh_token")]
		if !ok {
			fail("invalid_grant")
			return
		}
		delete(o.refresh, f.Get("refresh_token"))
		user = u
		o.Refreshs++
	default:
		fail("unsupported_grant_type")
		return
	}
	o.next++
	at, rt := fmt.Sprintf("at-%s-%d", user, o.next), fmt.Sprintf("rt-%s-%d", user, o.next)
	o.access[at] = tokenInfo{user: user, expires: time.Now().Add(o.TokenTTL)}
	o.refresh[rt] = user
	writeJSON(w, map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt, "expires_in": int(o.TokenTTL / time.Second)})
}

// SignIn follows a sign-in link as person login would in a browser: the
// authorization server's page, then its redirect to loadout's callback.
// It returns the callback's answer.
func SignIn(link, login string) (string, error) {
	u, err := url.Parse(link)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("login", login)
	u.RawQuery = q.Encode()
	resp, err := http.Get(u.String())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		return b.String(), errors.New(resp.Status)
	}
	return b.String(), nil
}

// SignInAt is SignIn for a loadout whose callback is served at base (a
// test's listener) rather than where the link's redirect_uri says.
func SignInAt(link, login, base string) (string, error) {
	u, err := url.Parse(link)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("login", login)
	u.RawQuery = q.Encode()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(u.String())
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		return "", fmt.Errorf("the authorization server answered %s", resp.Status)
	}
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	loc.Scheme, loc.Host = b.Scheme, b.Host
	resp, err = http.Get(loc.String())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		return sb.String(), errors.New(resp.Status)
	}
	return sb.String(), nil
}
