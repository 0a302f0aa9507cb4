package whatsapptest

import "context"

// Faults: a revoked token, failed calls of the messages endpoint, failed
// downloads (FailDownloads, with media), and sends held on their way.

// Failure is a queued error answer of the messages endpoint.
type Failure struct {
	Status  int
	Code    int
	Message string
}

// RejectToken makes every call answer 401, as for a revoked token.
func (s *Server) RejectToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badToken = true
}

// Fail queues error answers of the messages endpoint.
func (s *Server) Fail(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f...)
}

// failure takes the next queued error answer, if any.
func (s *Server) failure() (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) == 0 {
		return Failure{}, false
	}
	f := s.failures[0]
	s.failures = s.failures[1:]
	return f, true
}

// Hold lets n more sends through, then holds the rest until Release.
func (s *Server) Hold(n int) { s.gate.Hold("", n) }

// Release lets held sends through.
func (s *Server) Release() { s.gate.Release("") }

// Waiting is how many sends are held now.
func (s *Server) Waiting() int { return s.gate.Waiting("") }

// pass holds a send while the gate holds, and reports whether it may go
// on: false when its client (ctx) gave up while it was held, even as it
// was released, for an abandoned send is never sent.
func (s *Server) pass(ctx context.Context) bool {
	release, held := s.gate.Held("")
	if !held {
		return true
	}
	released := s.gate.Wait(ctx, "", release)
	s.changed.Notify() // Waiting fell
	return released && ctx.Err() == nil
}
