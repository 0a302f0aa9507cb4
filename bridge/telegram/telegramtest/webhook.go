package telegramtest

import "net/http"

// The webhook: while one is set, getUpdates conflicts, and Telegram
// posts each update to it instead.

// SetWebhook sets a webhook as an earlier run in webhook mode left it:
// getUpdates conflicts until deleteWebhook.
func (s *Server) SetWebhook(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhook = url
}

// Update returns m as the JSON of an update with a new id, without
// queueing it: what Telegram posts to a webhook.
func (s *Server) Update(m Message) (int, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	return id, s.updateJSON(id, m)
}

// setWebhook answers setWebhook and deleteWebhook (which sends no url).
func (s *Server) setWebhook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.webhook = r.PostForm.Get("url")
	s.mu.Unlock()
	writeOK(w, true)
}

// hooked reports whether a webhook is set.
func (s *Server) hooked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook != ""
}
