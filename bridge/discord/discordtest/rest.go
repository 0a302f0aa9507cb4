package discordtest

import (
	"encoding/json"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// The REST API: the calls the bot makes, recorded in order, each
// answered as Discord would (or 401, or a 429 that RateLimit set), and
// the CDN its attachments come from.

// api serves the REST API: it records the call, answers 401 to a wrong
// token and 429 where RateLimit asks, and routes the rest.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	defer s.changed().Notify() // what the request changed is in place
	p := "/" + strings.TrimPrefix(r.URL.Path, "/api/v9/")
	q := map[string]string{}
	for k, v := range r.URL.Query() {
		q[k] = v[0]
	}
	s.calls.Add(Call{Method: r.Method, Path: p, Query: q, At: time.Now()})
	s.changed().Notify()
	s.mu.Lock()
	authorized := !s.badToken && r.Header.Get("Authorization") == "Bot "+Token
	var l *limit
	if authorized {
		l = s.takeLimit(r.Method, p)
	}
	s.mu.Unlock()
	if !authorized {
		fail(w, http.StatusUnauthorized, 0, "401: Unauthorized")
		return
	}
	if l != nil {
		l.answer(w)
		return
	}
	seg := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case r.Method == "GET" && (p == "/gateway" || p == "/gateway/bot"):
		reply(w, map[string]any{"url": s.GatewayURL, "shards": 1})
	case r.Method == "GET" && p == "/users/@me":
		reply(w, bot())
	case r.Method == "POST" && p == "/users/@me/channels":
		var body struct {
			Recipient string `json:"recipient_id"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		reply(w, map[string]any{"id": s.DM(body.Recipient), "type": 1})
	case r.Method == "GET" && len(seg) == 4 && seg[0] == "guilds" && seg[2] == "members":
		s.mu.Lock()
		roles, ok := s.members[seg[1]+"/"+seg[3]]
		s.mu.Unlock()
		if !ok {
			fail(w, http.StatusNotFound, 10007, "Unknown Member")
			return
		}
		reply(w, map[string]any{"user": map[string]any{"id": seg[3]}, "roles": roles})
	case r.Method == "PUT" && len(seg) >= 3 && seg[0] == "applications" && seg[len(seg)-1] == "commands":
		s.putCommands(w, r, seg)
	case len(seg) >= 3 && seg[0] == "channels" && seg[2] == "typing" && r.Method == "POST":
		s.mu.Lock()
		s.typing[seg[1]]++
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == "GET":
		s.list(w, seg[1], q)
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == "POST":
		s.create(w, r, seg[1], "")
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == "PATCH":
		s.edit(w, r, seg[1], seg[3])
	case len(seg) == 4 && seg[0] == "interactions" && seg[3] == "callback" && r.Method == "POST":
		s.callback(w, r, seg[1], seg[2])
	case len(seg) == 3 && seg[0] == "webhooks" && r.Method == "POST":
		s.followUp(w, r, seg[2])
	case len(seg) == 5 && seg[0] == "webhooks" && seg[3] == "messages" && r.Method == "PATCH":
		s.mu.Lock()
		id, ok := s.tokens[seg[2]]
		ch := ""
		if m := s.find(seg[4]); ok && m != nil && m.sent != nil && m.sent.Interaction == id {
			ch = m.sent.Channel
		}
		s.mu.Unlock()
		if ch == "" {
			fail(w, http.StatusNotFound, 10008, "Unknown Message")
			return
		}
		s.edit(w, r, ch, seg[4])
	default:
		fail(w, http.StatusNotFound, 0, "404: Not Found")
	}
}

// fail answers an API error as Discord does.
func fail(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"message": msg, "code": code})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Calls are the REST requests made whose method is method and whose
// path (under the API) matches pattern ("/channels/*/messages").
func (s *Server) Calls(method, pattern string) []Call {
	return s.calls.Filter(func(c Call) bool {
		ok, _ := path.Match(pattern, c.Path)
		return ok && c.Method == method
	})
}

// RejectToken answers every request 401 and closes the gateway with
// 4004, as for a wrong token.
func (s *Server) RejectToken(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badToken = on
}

func (s *Server) putCommands(w http.ResponseWriter, r *http.Request, seg []string) {
	var cmds []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := json.NewDecoder(r.Body).Decode(&cmds); err != nil {
		fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return
	}
	scope := ""
	if len(seg) == 5 && seg[2] == "guilds" {
		scope = seg[3]
	}
	var names []string
	for _, c := range cmds {
		if c.Name == "" || len(c.Description) > 100 || c.Description == "" {
			fail(w, http.StatusBadRequest, 50035, "Invalid Form Body")
			return
		}
		names = append(names, c.Name)
	}
	s.mu.Lock()
	s.commands[scope] = names
	s.overwrite++
	s.mu.Unlock()
	reply(w, cmds)
}

// Commands are the slash commands registered in scope (a server's id,
// "" for global), by name.
func (s *Server) Commands(scope string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commands[scope])
}

// Typing counts the typing signs in channel.
func (s *Server) Typing(channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.typing[channel]
}

// download serves the CDN's attachments.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/cdn/attachments/"), "/")
	s.mu.Lock()
	var b []byte
	ok := false
	if len(parts) == 3 {
		b, ok = s.cdn[parts[1]]
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(b)
}
