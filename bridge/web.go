package bridge

import "net/http"

// WebAuth is who is signed in to the web console (package ui), for a
// channel that serves pages on the process's server (the browser chat):
// it never signs anyone in itself. Env.Web is nil when the console is
// off.
type WebAuth interface {
	// Viewer is the person signed in on r: their user key (the key their
	// channel gives them, e.g. "telegram:42"; the operator's is
	// "ui:operator") and whether they are the operator. ok false:
	// nobody.
	Viewer(r *http.Request) (userKey string, admin bool, ok bool)
	// CheckCSRF reports whether a state-changing request r carries this
	// session's CSRF token (header "X-CSRF-Token" or form field "csrf").
	CheckCSRF(r *http.Request) bool
	// CSRFToken is the token a page of this session embeds.
	CSRFToken(r *http.Request) string
}
