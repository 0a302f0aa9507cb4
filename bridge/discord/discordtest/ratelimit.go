package discordtest

import (
	"encoding/json"
	"net/http"
	"path"
	"slices"
	"strconv"
)

// Rate limits: a 429 a test sets for the bot's next request of a kind,
// global or not.

// limit is a 429 that RateLimit set for the next request of method on
// pattern: retry after seconds, global or not.
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

// takeLimit removes and returns the first limit set for a request of
// method on p, nil when there is none; s.mu is held.
func (s *Server) takeLimit(method, p string) *limit {
	for i, l := range s.limits {
		if ok, _ := path.Match(l.pattern, p); ok && l.method == method {
			s.limits = slices.Delete(s.limits, i, i+1)
			return &l
		}
	}
	return nil
}

// answer writes the 429 as Discord does: Retry-After in whole seconds,
// the exact wait in the body, and the global headers when global.
func (l *limit) answer(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(int(l.after+0.999)))
	if l.global {
		w.Header().Set("X-RateLimit-Global", "true")
		w.Header().Set("X-RateLimit-Scope", "global")
	}
	w.WriteHeader(http.StatusTooManyRequests)
	json.NewEncoder(w).Encode(map[string]any{"message": "You are being rate limited.", "retry_after": l.after, "global": l.global})
}
