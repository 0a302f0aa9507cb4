package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"loadout/bridge"
	"loadout/chat"
)

// CookieName is the session cookie's name.
const CookieName = "loadout_session"

// viewer is who is signed in on a request.
type viewer struct {
	UserKey string
	Admin   bool
	CSRF    string
	session string
}

// owns reports whether the viewer may see and change what belongs to
// owner: their own things, or anything for the operator.
func (v viewer) owns(owner string) bool { return v.Admin || (owner != "" && owner == v.UserKey) }

// secret is a new random secret, URL-safe.
func secret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is how secrets are stored: their SHA-256, in hex.
func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

type viewerKey struct{}

// session is the live session of r's cookie, read once per request.
func (c *Console) session(r *http.Request) (viewer, error) {
	if v, ok := r.Context().Value(viewerKey{}).(viewer); ok {
		return v, nil
	}
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return viewer{}, errNoSession
	}
	s, err := c.d.Store.WebSession(r.Context(), hash(ck.Value))
	switch {
	case errors.Is(err, chat.ErrNotFound):
		// Signed out, revoked, or a cookie of another deployment.
		c.log.Warn("ui: refused a session cookie this server does not know", "remote", remote(r), "path", r.URL.Path)
		return viewer{}, errNoSession
	case err != nil:
		return viewer{}, err
	case !c.now().Before(s.ExpiresAt):
		c.log.Info("ui: refused an expired session", "user", s.UserKey, "remote", remote(r))
		return viewer{}, errNoSession
	}
	if !s.Admin {
		if err := c.admitted(r.Context(), s.UserKey); err != nil {
			return viewer{}, err
		}
	}
	return viewer{UserKey: s.UserKey, Admin: s.Admin, CSRF: s.CSRF, session: s.ID}, nil
}

// admitted is nil when user may use the web side now: the operator
// always; a person while the channel they came from lets them in
// (Chats.Admits), as it would let in a message of theirs. A person it
// does not let in has every web session of theirs ended here, and the
// error is bridge.ErrNotAdmitted; any other error is that it cannot
// tell, which ends nothing.
func (c *Console) admitted(ctx context.Context, user string) error {
	if user == OperatorKey {
		return nil
	}
	ok := false
	if c.d.Chats != nil {
		var err error
		if ok, err = c.d.Chats.Admits(ctx, user); err != nil {
			return fmt.Errorf("%w: %s: %w", errUnsure, user, err)
		}
	}
	if ok {
		return nil
	}
	n, err := c.d.Store.DeleteUserWebSessions(ctx, user)
	if err != nil {
		return err
	}
	c.log.Warn("ui: refused a person their channel does not let in now; their web sessions have ended", "user", user, "sessions", n)
	return bridge.ErrNotAdmitted
}

// errUnsure is admitted's error when the person's channel cannot tell
// now whether it lets them in (503, and nothing ends).
var errUnsure = errors.New("ui: the channel cannot tell now whether it lets the person in")

// Viewer is the person signed in on r (bridge.WebAuth).
func (c *Console) Viewer(r *http.Request) (string, bool, error) {
	v, err := c.session(r)
	if errors.Is(err, errNoSession) {
		return "", false, bridge.ErrSignedOut
	}
	if err != nil {
		return "", false, err
	}
	return v.UserKey, v.Admin, nil
}

// CheckCSRF reports whether r carries its session's CSRF token, in the
// header X-CSRF-Token or the form field csrf (bridge.WebAuth).
func (c *Console) CheckCSRF(r *http.Request) bool {
	v, err := c.session(r)
	if err != nil {
		return false
	}
	return c.csrfOK(r, v)
}

func (c *Console) csrfOK(r *http.Request, v viewer) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && v.CSRF != "" && subtle.ConstantTimeCompare([]byte(got), []byte(v.CSRF)) == 1 && sameOrigin(r)
}

// sameOrigin refuses a request whose Origin header names another site
// (a browser always sends it on a cross-site POST).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// CSRFToken is the token r's session embeds in its pages (bridge.WebAuth).
func (c *Console) CSRFToken(r *http.Request) string {
	v, err := c.session(r)
	if err != nil {
		return ""
	}
	return v.CSRF
}

// remote is the request's peer address, for logs and rate limits.
func remote(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// startSession signs the browser in as userKey and sets its cookie.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, userKey string, admin bool) error {
	value := secret()
	now := c.now()
	s := Session{ID: hash(value), UserKey: userKey, Admin: admin, CSRF: secret(), CreatedAt: now, ExpiresAt: now.Add(c.cfg.SessionTTL.Std())}
	if err := c.d.Store.CreateWebSession(r.Context(), s); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", HttpOnly: true, Secure: c.secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(c.cfg.SessionTTL.Std() / time.Second), Expires: s.ExpiresAt})
	c.log.Info("ui: signed in", "user", userKey, "operator", admin, "remote", remote(r))
	return nil
}

func (c *Console) clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: c.secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// Link makes a one-time sign-in link for userKey, while the channel
// they came from lets them in: else bridge.ErrNotAdmitted, and their
// web sessions have ended.
func (c *Console) Link(ctx context.Context, userKey string) (string, error) {
	if err := c.admitted(ctx, userKey); err != nil {
		return "", err
	}
	t := secret()
	if err := c.d.Store.CreateWebLink(ctx, hash(t), userKey, c.now().Add(c.cfg.LinkTTL.Std())); err != nil {
		return "", err
	}
	return c.cfg.BaseURL + "/signin?t=" + t, nil
}

// loginPage serves the sign-in form.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, err := c.session(r); err == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", viewer{}, map[string]any{})
}

// login exchanges the admin token for a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.attempt(r) {
		c.log.Warn("ui: sign-in refused: too many attempts", "remote", remote(r))
		c.render(w, r, http.StatusTooManyRequests, "login", viewer{}, map[string]any{"Error": "Too many attempts. Wait a minute and try again."})
		return
	}
	if !sameOrigin(r) {
		c.log.Warn("ui: sign-in refused: posted from another site", "remote", remote(r), "origin", r.Header.Get("Origin"))
		c.render(w, r, http.StatusForbidden, "login", viewer{}, map[string]any{"Error": "This form was sent from another site, so it was refused."})
		return
	}
	token := r.PostFormValue("token")
	got := sha256.Sum256([]byte(token))
	if token == "" || subtle.ConstantTimeCompare(got[:], c.adminHash[:]) != 1 {
		c.log.Warn("ui: sign-in refused: wrong token", "remote", remote(r))
		c.render(w, r, http.StatusUnauthorized, "login", viewer{}, map[string]any{"Error": "That token is not right."})
		return
	}
	if err := c.startSession(w, r, OperatorKey, true); err != nil {
		c.fail(w, r, viewer{}, err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signinPage shows the button that uses a /web link. Opening the link
// does not use it: chat apps open links to preview them.
func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	t := r.URL.Query().Get("t")
	if t == "" || len(t) > 100 {
		c.render(w, r, http.StatusBadRequest, "login", viewer{}, map[string]any{"Error": "This sign-in link is incomplete. Send /web in a private chat with me for a new one."})
		return
	}
	c.render(w, r, http.StatusOK, "signin", viewer{}, map[string]any{"Token": t})
}

// signin uses a /web link: once, before it expires.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if !c.attempt(r) {
		c.log.Warn("ui: link sign-in refused: too many attempts", "remote", remote(r))
		c.render(w, r, http.StatusTooManyRequests, "login", viewer{}, map[string]any{"Error": "Too many attempts. Wait a minute and try again."})
		return
	}
	if !sameOrigin(r) {
		c.log.Warn("ui: link sign-in refused: posted from another site", "remote", remote(r))
		c.render(w, r, http.StatusForbidden, "login", viewer{}, map[string]any{"Error": "This form was sent from another site, so it was refused."})
		return
	}
	t := r.PostFormValue("t")
	user, expires, err := c.d.Store.TakeWebLink(r.Context(), hash(t))
	switch {
	case t == "" || errors.Is(err, chat.ErrNotFound):
		c.log.Warn("ui: link sign-in refused: unknown or already used link", "remote", remote(r))
		c.render(w, r, http.StatusForbidden, "login", viewer{}, map[string]any{"Error": "This sign-in link was already used or is not valid. Send /web in a private chat with me for a new one."})
		return
	case err != nil:
		c.fail(w, r, viewer{}, err)
		return
	case !c.now().Before(expires):
		c.log.Warn("ui: link sign-in refused: expired link", "user", user, "remote", remote(r))
		c.render(w, r, http.StatusForbidden, "login", viewer{}, map[string]any{"Error": "This sign-in link has expired. Send /web in a private chat with me for a new one."})
		return
	}
	// A link made before its person was taken off their channel's list
	// signs nobody in.
	if err := c.admitted(r.Context(), user); errors.Is(err, bridge.ErrNotAdmitted) {
		c.render(w, r, http.StatusForbidden, "login", viewer{}, map[string]any{"Error": bridge.TextNotAdmitted})
		return
	} else if errors.Is(err, errUnsure) {
		c.log.Warn("ui: link sign-in refused: the person's channel cannot tell now whether it lets them in", "user", user, "err", err)
		c.render(w, r, http.StatusServiceUnavailable, "login", viewer{}, map[string]any{"Error": "I can't confirm just now that the chat app you came from still lets you in, so this link signed nobody in, and it is used up. In a moment, send /web there for a new one."})
		return
	} else if err != nil {
		c.fail(w, r, viewer{}, err)
		return
	}
	if err := c.startSession(w, r, user, false); err != nil {
		c.fail(w, r, viewer{}, err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, v viewer) error {
	if err := c.d.Store.DeleteWebSession(r.Context(), v.session); err != nil {
		return err
	}
	c.clearCookie(w)
	c.log.Info("ui: signed out", "user", v.UserKey)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// Sign-in attempts allowed from one address: attemptsPerWindow in any
// attemptWindow, counted in the store, so several processes behind one
// address allow no more between them than one would.
const (
	attemptsPerWindow = 5
	attemptWindow     = time.Minute
)

// attempt counts a sign-in attempt of r's address and reports whether it
// is within the limit. An attempt that cannot be counted is refused.
func (c *Console) attempt(r *http.Request) bool {
	ok, err := c.d.Store.Hit(r.Context(), "ui:sign-in:"+remote(r), secret(), attemptsPerWindow, attemptWindow)
	if err != nil {
		c.log.Error("ui: cannot count a sign-in attempt; it is refused", "remote", remote(r), "err", err)
		return false
	}
	return ok
}
