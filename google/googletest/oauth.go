package googletest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// OAuthServer is a fake of Google's OAuth endpoints: /auth (not served:
// use Approve instead of a browser), /token (authorization_code with PKCE
// S256, and refresh_token) and /revoke. It is safe for concurrent use.
type OAuthServer struct {
	URL string
	// ClientID is the client the server expects.
	ClientID string
	// ExpiresIn is the lifetime in seconds of the access tokens it issues;
	// zero means 3599. Below 10, oauth2 treats a token as stale at once.
	ExpiresIn int

	// Emails names the account of an access token in the ID token.
	Emails map[string]string

	srv       *httptest.Server
	mu        sync.Mutex
	codes     map[string]grant
	refused   map[string]bool
	refreshes map[string]int
	revoked   []string
	n         int
}

type grant struct {
	challenge, redirect    string
	access, refresh, scope string
}

// NewOAuthServer starts the fake on 127.0.0.1; it closes when the test
// ends.
func NewOAuthServer(t testing.TB, clientID string) *OAuthServer {
	s := &OAuthServer{ClientID: clientID, codes: map[string]grant{}, refused: map[string]bool{}, refreshes: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /revoke", s.revoke)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// email is the address of the account whose access token is access:
// Emails[access] when set, else <access>@example.com.
func (s *OAuthServer) email(access string) string {
	if e := s.Emails[access]; e != "" {
		return e
	}
	return access + "@example.com"
}

// AuthURL, TokenURL and RevokeURL are the endpoints to configure.
func (s *OAuthServer) AuthURL() string   { return s.URL + "/auth" }
func (s *OAuthServer) TokenURL() string  { return s.URL + "/token" }
func (s *OAuthServer) RevokeURL() string { return s.URL + "/revoke" }

// Approve plays the person allowing access on the consent page of
// authURL: it returns the URL the browser is sent back to, with a one-time
// code that the token endpoint exchanges for access and refresh. scope is
// what Google reports as granted ("" means what authURL asked for).
func (s *OAuthServer) Approve(t testing.TB, authURL, access, refresh, scope string) string {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("client_id") != s.ClientID || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("response_type") != "code" || q.Get("access_type") != "offline" {
		t.Fatalf("consent link lacks client id, PKCE or offline access: %s", authURL)
	}
	if scope == "" {
		scope = q.Get("scope")
	}
	s.mu.Lock()
	s.n++
	code := fmt.Sprintf("code-%d", s.n)
	s.codes[code] = grant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), access: access, refresh: refresh, scope: scope}
	s.mu.Unlock()
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		t.Fatal(err)
	}
	bq := back.Query()
	bq.Set("state", q.Get("state"))
	bq.Set("code", code)
	back.RawQuery = bq.Encode()
	return back.String()
}

// Refuse makes the token endpoint answer invalid_grant for refresh.
func (s *OAuthServer) Refuse(refresh string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[refresh] = true
}

// Refreshes returns how often refresh was used.
func (s *OAuthServer) Refreshes(refresh string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshes[refresh]
}

// Revoked returns the tokens revoked so far.
func (s *OAuthServer) Revoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.revoked...)
}

// RefreshedAccess is the access token the fake issues on the n-th refresh
// of refresh.
func RefreshedAccess(refresh string, n int) string { return fmt.Sprintf("%s-access-%d", refresh, n) }

func (s *OAuthServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request", err.Error())
		return
	}
	if r.PostForm.Get("client_id") != s.ClientID {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "The OAuth client was not found."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		if !ok {
			oauthError(w, "invalid_grant", "Malformed auth code.")
			return
		}
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			oauthError(w, "invalid_grant", "Invalid code verifier.")
			return
		}
		if r.PostForm.Get("redirect_uri") != g.redirect {
			oauthError(w, "redirect_uri_mismatch", "Bad Request")
			return
		}
		out := map[string]any{
			"access_token": g.access, "expires_in": s.expiresIn(), "refresh_token": g.refresh,
			"scope": g.scope, "token_type": "Bearer",
		}
		if slices.Contains(strings.Fields(g.scope), "email") {
			// As Google does for openid email: an ID token naming the
			// account.
			enc := base64.RawURLEncoding.EncodeToString
			claims, _ := json.Marshal(map[string]any{"iss": "https://accounts.google.com", "aud": s.ClientID,
				"sub": "1000" + g.access, "email": s.email(g.access), "email_verified": true})
			out["id_token"] = enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc(claims) + "." + enc([]byte("signature"))
		}
		json.NewEncoder(w).Encode(out)
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if s.refused[rt] || rt == "" {
			oauthError(w, "invalid_grant", "Token has been expired or revoked.")
			return
		}
		s.refreshes[rt]++
		json.NewEncoder(w).Encode(map[string]any{
			"access_token": RefreshedAccess(rt, s.refreshes[rt]), "expires_in": s.expiresIn(), "token_type": "Bearer",
		})
	default:
		oauthError(w, "unsupported_grant_type", "Invalid grant_type: "+r.PostForm.Get("grant_type"))
	}
}

func (s *OAuthServer) expiresIn() int {
	if s.ExpiresIn == 0 {
		return 3599
	}
	return s.ExpiresIn
}

func (s *OAuthServer) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("token") == "" {
		oauthError(w, "invalid_request", "missing token")
		return
	}
	s.mu.Lock()
	s.revoked = append(s.revoked, r.PostForm.Get("token"))
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func oauthError(w http.ResponseWriter, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}
