package discordtest

import "net/http"

// The hold: a test stops the bot's channel messages on their way, to
// see what the bot does while a send hangs or is abandoned. It is the
// kit's Gate under the key "", the fake's one hold; the follow-ups of
// interactions are never held.

// Hold lets the bot's next n channel messages through and holds the
// rest until Release; a held request the bot abandons is never posted.
func (s *Server) Hold(n int) { s.gate.Hold("", n) }

// Waiting counts the held requests.
func (s *Server) Waiting() int { return s.gate.Waiting("") }

// Release lets held and later messages through.
func (s *Server) Release() { s.gate.Release("") }

// pass lets the bot's channel message r on, or holds it while Hold says
// so; false when the bot abandoned it while held (its request ended,
// even as it was released): it is then never posted.
func (s *Server) pass(r *http.Request) bool {
	release, held := s.gate.Held("")
	if !held {
		return true
	}
	return s.gate.Wait(r.Context(), "", release) && r.Context().Err() == nil
}
