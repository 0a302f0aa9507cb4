package slacktest

import (
	"context"
	"net/http"
)

// Holds: a Web API method's calls stopped on their way, on the kit's
// Gate keyed by method, so a test can stage a crash while Slack is
// being sent something.

// Hold lets the next after calls of the Web API method through and
// makes later ones wait, before Slack acts on them, until Release or
// until their client gives up. A call its client gave up on is not
// recorded in Calls (Slack never saw it) but in Abandoned. Holding a
// method already held changes only how many calls go through.
func (s *Server) Hold(method string, after int) { s.hold(method, after, false) }

// HoldReply is Hold for calls that Slack acts on (a held chat.postMessage
// is posted and recorded in Calls) while their answer waits: the client
// cannot tell whether the call went through.
func (s *Server) HoldReply(method string, after int) { s.hold(method, after, true) }

func (s *Server) hold(method string, after int, reply bool) {
	s.mu.Lock()
	s.replyOnly[method] = reply
	s.mu.Unlock()
	s.holds.Hold(method, after)
}

// Release lets the held calls of method go on, and later ones through.
func (s *Server) Release(method string) {
	s.holds.Release(method)
	s.mu.Lock()
	delete(s.replyOnly, method)
	s.mu.Unlock()
}

// Waiting returns how many calls of method are held right now.
func (s *Server) Waiting(method string) int { return s.holds.Waiting(method) }

// Abandoned returns the held calls of method ("" for all) whose client
// gave up before Slack acted on them.
func (s *Server) Abandoned(method string) []Call {
	return s.abandoned.Filter(func(c Call) bool { return method == "" || c.Method == method })
}

// held reports whether a call of method that just arrived is to be held,
// and whether Slack acts on it first (HoldReply); it waits with wait on
// release.
func (s *Server) held(method string) (release <-chan struct{}, held, reply bool) {
	release, held = s.holds.Held(method)
	if held {
		s.mu.Lock()
		reply = s.replyOnly[method]
		s.mu.Unlock()
	}
	return release, held, reply
}

// wait holds a call of method until release is closed; it reports false
// when the client gave up first or the server is closing.
func (s *Server) wait(r *http.Request, method string, release <-chan struct{}) bool {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	return s.holds.Wait(ctx, method, release) && r.Context().Err() == nil
}
