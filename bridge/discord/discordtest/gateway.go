package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gorilla/websocket"
)

// The gateway: one session at a time over a websocket — Hello,
// Identify and Ready, heartbeats, Resume with the events it missed, and
// the dispatches of what people do.

// session is a gateway session: its events, each with its sequence
// number, kept to replay on a resume, and its connection if one is open.
type session struct {
	id     string
	events [][]byte
	conn   *conn
}

// conn is a websocket connection of the gateway, and what waits to be
// written on it.
type conn struct {
	ws  *websocket.Conn
	out chan []byte
}

// Gateway is what the gateway saw: identifies (new sessions), resumes,
// connections opened, and the intents of the last Identify.
func (s *Server) Gateway() (identifies, resumes, conns, intents int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions, s.resumes, s.conns, s.intents
}

// Connected reports whether a gateway connection is open and its
// session started.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session != nil && s.session.conn != nil
}

// Drop closes the gateway connection abruptly; events until the bot
// resumes are kept for it.
func (s *Server) Drop() {
	defer s.changed().Notify()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil && s.session.conn != nil {
		s.session.conn.ws.UnderlyingConn().Close()
		s.session.conn = nil
	}
}

// NoResume makes every resume fail (op 9): the bot must identify anew,
// and what the old session had not delivered is lost to the gateway.
func (s *Server) NoResume(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noResume = on
}

// dispatch sends an event to the session; s.mu is held.
func (s *Server) dispatch(kind string, d any) {
	if s.session == nil {
		return // nobody ever connected: the event reaches no one
	}
	se := s.session
	b, _ := json.Marshal(map[string]any{"op": 0, "t": kind, "s": len(se.events) + 1, "d": d})
	se.events = append(se.events, b)
	if se.conn != nil {
		se.conn.send(b)
	}
	s.changed().Notify()
}

// send queues b for the connection's writer; a connection whose queue
// is full is closed.
func (c *conn) send(b []byte) {
	select {
	case c.out <- b:
	default: // a bot that reads nothing loses its connection
		c.ws.UnderlyingConn().Close()
	}
}

// gateway serves one websocket connection of the gateway.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws, out: make(chan []byte, 4096)}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case b := <-c.out:
				if ws.WriteMessage(websocket.TextMessage, b) != nil {
					return
				}
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	defer ws.Close()
	defer s.changed().Notify() // the connection is lost
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	s.changed().Notify()
	c.out <- mustJSON(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 41250}})
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			s.mu.Lock()
			if s.session != nil && s.session.conn == c {
				s.session.conn = nil
			}
			s.mu.Unlock()
			return
		}
		var f struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if json.Unmarshal(b, &f) != nil {
			return
		}
		switch f.Op {
		case 1:
			c.out <- mustJSON(map[string]any{"op": 11})
		case 2:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			json.Unmarshal(f.D, &id)
			s.mu.Lock()
			if id.Token != "Bot "+Token || s.badToken {
				s.mu.Unlock()
				ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."))
				return
			}
			if s.session != nil && s.session.conn != nil && s.session.conn != c {
				s.session.conn.ws.UnderlyingConn().Close()
			}
			s.sessions++
			s.intents = id.Intents
			s.session = &session{id: fmt.Sprintf("session-%d", s.sessions), conn: c}
			s.dispatch("READY", map[string]any{"v": 10, "session_id": s.session.id, "user": bot(),
				"application": map[string]any{"id": AppID, "flags": 0}, "guilds": []any{}, "private_channels": []any{},
				"resume_gateway_url": s.GatewayURL})
			s.mu.Unlock()
		case 6:
			var re struct {
				Session string `json:"session_id"`
				Seq     int    `json:"seq"`
			}
			json.Unmarshal(f.D, &re)
			s.mu.Lock()
			se := s.session
			if s.noResume || se == nil || se.id != re.Session || re.Seq > len(se.events) {
				s.mu.Unlock()
				c.out <- mustJSON(map[string]any{"op": 9, "d": false})
				continue
			}
			s.resumes++
			if se.conn != nil && se.conn != c {
				se.conn.ws.UnderlyingConn().Close()
			}
			se.conn = c
			for _, e := range se.events[re.Seq:] {
				c.send(e)
			}
			se.events = append(se.events, mustJSON(map[string]any{"op": 0, "t": "RESUMED", "s": len(se.events) + 1, "d": map[string]any{}}))
			c.send(se.events[len(se.events)-1])
			s.mu.Unlock()
			s.changed().Notify()
		}
	}
}
