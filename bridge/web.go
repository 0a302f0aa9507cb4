package bridge

import (
	"errors"
	"net/http"
)

// WebAuth is who is signed in to the web console (package ui), for a
// channel that serves pages on the process's server (the browser chat):
// it never signs anyone in itself. Env.Web is nil when the console is
// off.
type WebAuth interface {
	// Viewer is the person signed in on r: their user key (the key their
	// channel gives them, e.g. "telegram:42"; the operator's is
	// "ui:operator") and whether they are the operator. The error is
	// ErrSignedOut when nobody is, ErrNotAdmitted when the person's
	// channel no longer lets them in (their sessions have ended), or
	// another when it cannot tell (the store failed).
	Viewer(r *http.Request) (userKey string, admin bool, err error)
	// CheckCSRF reports whether a state-changing request r carries this
	// session's CSRF token (header "X-CSRF-Token" or form field "csrf").
	CheckCSRF(r *http.Request) bool
	// CSRFToken is the token a page of this session embeds.
	CSRFToken(r *http.Request) string
}

// Viewer's errors.
var (
	// ErrSignedOut: nobody is signed in on the request.
	ErrSignedOut = errors.New("bridge: nobody is signed in")
	// ErrNotAdmitted: the person signed in is no longer let in by the
	// channel they came from (Admitter); every web session of theirs has
	// ended.
	ErrNotAdmitted = errors.New("bridge: the person's channel no longer lets them in")
)

// TextNotAdmitted is what a person is told on the web when the channel
// they came from does not let them in now. It says what is known: a
// person let in by a username the channel has not kept yet (one who
// has not written since) is told the same, and writing there fixes it.
const TextNotAdmitted = "Your web session has ended: I can't confirm that the chat app you signed in from still lets you talk to me. Write to me there and send /web for a new link; if I don't answer there, ask my owner to add you again."
