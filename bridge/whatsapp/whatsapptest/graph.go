package whatsapptest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The Graph API: its routes, and its answers.

// api serves the Graph API.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	bad := s.badToken
	s.mu.Unlock()
	if bad || r.Header.Get("Authorization") != "Bearer "+Token {
		apiError(w, http.StatusUnauthorized, 190, "Invalid OAuth access token - Cannot parse access token")
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/"+Version+"/")
	switch {
	case r.Method == http.MethodGet && path == PhoneNumberID:
		reply(w, map[string]string{"display_phone_number": Display, "verified_name": "loadout", "id": PhoneNumberID})
	case r.Method == http.MethodPost && path == PhoneNumberID+"/messages":
		s.messages(w, r)
	case r.Method == http.MethodPost && path == PhoneNumberID+"/media":
		s.upload(w, r)
	case r.Method == http.MethodGet && !strings.Contains(path, "/"):
		s.lookup(w, path)
	default:
		apiError(w, http.StatusBadRequest, 100, "Unsupported request")
	}
}

// apiError answers as the Graph API does.
func apiError(w http.ResponseWriter, status, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": "OAuthException", "code": code,
		"error_data": map[string]string{"messaging_product": "whatsapp", "details": message}, "fbtrace_id": "Afake"}})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
