package telegramtest

import (
	"context"
	"net/http"
)

// Failures and holds: what a test scripts a method to do instead of
// answering at once. Holds are bridgetest's Gate, keyed by method.

type failure struct {
	code       int
	desc       string
	retryAfter int
}

// FailNext makes the next call of method answer with an error: code,
// description, and retry_after seconds when retryAfter > 0. Calls queue.
func (s *Server) FailNext(method string, code int, description string, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[method] = append(s.fails[method], failure{code, description, retryAfter})
}

// Pause makes calls of method wait until Resume, or until the client gives
// up. A call abandoned by its client is not recorded as sent.
func (s *Server) Pause(method string) { s.Hold(method, 0) }

// Hold lets the next after calls of method through and makes later ones
// wait, as Pause does.
func (s *Server) Hold(method string, after int) {
	// Under s.mu, as arrive is: a call is counted against after, or
	// held, together with being recorded.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate.Hold(method, after)
}

// Resume lets paused calls of method go on.
func (s *Server) Resume(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate.Release(method)
}

// Waiting returns how many calls of method are held by Pause right now.
func (s *Server) Waiting(method string) int { return s.gate.Waiting(method) }

// arrive records call and takes what the test scripted for it: the
// failure to answer with, if any, and whether it is held (until release
// is closed). A call a test sees in Calls has had both decided.
func (s *Server) arrive(call Call) (fail *failure, release <-chan struct{}, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.fails[call.Method]; len(q) > 0 {
		fail = &q[0]
		s.fails[call.Method] = q[1:]
	}
	release, held = s.gate.Held(call.Method)
	s.calls.Add(call)
	s.notify()
	return fail, release, held
}

// wait holds r, a call of method, until release is closed; false when
// its client gave up meanwhile: the call is then not made, so a message
// it carried is not recorded as sent. The server closing lets a held
// call go on.
func (s *Server) wait(r *http.Request, method string, release <-chan struct{}) bool {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	s.gate.Wait(ctx, method, release)
	return r.Context().Err() == nil
}
