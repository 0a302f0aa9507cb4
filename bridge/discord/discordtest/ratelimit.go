package discordtest

type limit struct {
	method, pattern string
	after           float64
	global          bool
}

// RateLimit answers the next request of method on pattern with a 429
// that asks to retry after seconds, the bot's global limit when global.
func (s *Server) RateLimit(method, pattern string, seconds float64, global bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, limit{method, pattern, seconds, global})
}
