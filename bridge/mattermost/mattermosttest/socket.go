package mattermosttest

import (
	"encoding/json"
	"net/http"

	"github.com/gorilla/websocket"
)

// The websocket: a client sends an authentication_challenge with the
// token, is answered OK and "hello", then gets a posted event (the post
// as a JSON string) for every post in the bot's channels.

// Sessions counts the websockets authenticated so far.
func (s *Server) Sessions() int { s.mu.Lock(); defer s.mu.Unlock(); return s.auths }

// Drop closes every websocket abruptly.
func (s *Server) Drop() {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	for ws := range s.conns {
		ws.UnderlyingConn().Close() // the socket's reader ends and forgets it
	}
}

// event writes an event to every websocket; s.mu is held (one write).
func (s *Server) event(name string, data map[string]any) {
	for ws := range s.conns {
		if ws.WriteJSON(map[string]any{"event": name, "data": data, "broadcast": map[string]any{}}) != nil {
			ws.UnderlyingConn().Close()
		}
	}
}

func (s *Server) broadcast(p *Post) {
	post, _ := json.Marshal(p)
	s.event("posted", map[string]any{"channel_type": s.channels[p.Channel], "post": string(post), "sender_name": "@" + nameOf(p.User)})
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	var auth struct {
		Seq    int
		Action string
		Data   struct{ Token string }
	}
	if ws.ReadJSON(&auth) != nil || auth.Action != "authentication_challenge" || auth.Data.Token != Token {
		ws.WriteJSON(map[string]any{"status": "FAIL", "seq_reply": auth.Seq, "error": map[string]any{"id": "api.web_socket_router.not_authenticated.app_error"}})
		return
	}
	s.mu.Lock()
	if ws.WriteJSON(map[string]any{"status": "OK", "seq_reply": auth.Seq}) == nil &&
		ws.WriteJSON(map[string]any{"event": "hello", "data": map[string]any{"server_version": "10.5.0"}}) == nil {
		s.conns[ws], s.auths = true, s.auths+1
	}
	s.mu.Unlock()
	s.changed()
	for _, _, err := ws.ReadMessage(); err == nil; _, _, err = ws.ReadMessage() {
	}
	s.mu.Lock()
	delete(s.conns, ws)
	s.mu.Unlock()
	s.changed()
}
