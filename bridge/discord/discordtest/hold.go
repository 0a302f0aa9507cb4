package discordtest

// Hold lets the bot's next n channel messages through and holds the
// rest until Release; a held request the bot abandons is never posted.
func (s *Server) Hold(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.holding = n, true
}

// Waiting counts the held requests.
func (s *Server) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Release lets held and later messages through.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holding {
		close(s.release)
		s.release = make(chan struct{})
	}
	s.hold, s.holding = -1, false
}
