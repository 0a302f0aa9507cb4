package slacktest

import (
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"loadout/bridge/bridgetest"
)

// Socket Mode: the websocket apps.connections.open hands out, the
// envelopes sent over it, their acknowledgements, and Slack's ways of
// losing them.

// envelope is a Socket Mode envelope as sent, kept for Redeliver.
type envelope struct {
	id      string
	typ     string
	payload any
	attempt int
}

// socket accepts a Socket Mode connection, greets it with hello, pings it
// and records acknowledgements.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	conn, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	if old := s.conn; old != nil {
		old.Close()
	}
	s.conn = conn
	s.conns++
	s.mu.Unlock()
	s.changed.Notify()
	s.write(conn, map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]string{"app_id": "A0001"}})
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)) != nil {
				return
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		defer close(done)
		defer conn.Close()
		for {
			var ack struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if err := conn.ReadJSON(&ack); err != nil {
				s.mu.Lock()
				if s.conn == conn {
					s.conn = nil
				}
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			lose := s.lose > 0
			if lose {
				s.lose--
			}
			s.mu.Unlock()
			if lose {
				record(s, &s.lost, ack.EnvelopeID)
			} else {
				record(s, &s.acks, ack.EnvelopeID)
			}
		}
	}()
}

func (s *Server) write(conn *websocket.Conn, v any) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return conn.WriteJSON(v)
}

// WaitConnected waits until a Socket Mode client is connected.
func (s *Server) WaitConnected(t testing.TB) {
	t.Helper()
	bridgetest.WaitFor(t, "a socket mode connection", s.changed, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.conn != nil
	})
}

// Connections returns how many Socket Mode connections were opened.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Send delivers a Socket Mode envelope of type typ ("events_api",
// "slash_commands") with payload, waiting for a connection first.
func (s *Server) Send(t testing.TB, envelopeID, typ string, payload any, retryAttempt int) {
	t.Helper()
	s.send(t, envelope{id: envelopeID, typ: typ, payload: payload, attempt: retryAttempt})
}

func (s *Server) send(t testing.TB, e envelope) {
	t.Helper()
	s.WaitConnected(t)
	s.mu.Lock()
	conn := s.conn
	s.envelopes = append(s.envelopes, e)
	s.mu.Unlock()
	env := map[string]any{"envelope_id": e.id, "type": e.typ, "payload": e.payload,
		"accepts_response_payload": e.typ != "events_api", "retry_attempt": e.attempt}
	if e.attempt > 0 {
		env["retry_reason"] = "timeout"
	}
	if err := s.write(conn, env); err != nil {
		t.Fatalf("slacktest: sending envelope: %v", err)
	}
}

// Acks returns how many times the envelope was acknowledged.
func (s *Server) Acks(envelopeID string) int {
	return len(s.acks.Filter(func(id string) bool { return id == envelopeID }))
}

// WaitAck waits until the Socket Mode envelope was acknowledged.
func (s *Server) WaitAck(t testing.TB, envelopeID string) {
	t.Helper()
	bridgetest.WaitFor(t, "the ack of envelope "+envelopeID, &s.acks.Signal, func() bool { return s.Acks(envelopeID) > 0 })
}

// LoseAcks makes the next n Socket Mode acknowledgements get lost on the
// way: Slack never learns of them, and Redeliver sends their envelopes
// again.
func (s *Server) LoseAcks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = n
}

// WaitAckLost waits until the acknowledgement of the envelope was sent
// and lost (see LoseAcks).
func (s *Server) WaitAckLost(t testing.TB, envelopeID string) {
	t.Helper()
	bridgetest.WaitFor(t, "the lost ack of envelope "+envelopeID, &s.lost.Signal, func() bool {
		return len(s.lost.Filter(func(id string) bool { return id == envelopeID })) > 0
	})
}

// Redeliver sends again, with the next retry_attempt, every envelope that
// was not acknowledged, as Slack does when an ack does not arrive in
// time, and returns their ids. Each keeps its envelope id and payload.
func (s *Server) Redeliver(t testing.TB) []string {
	t.Helper()
	acked := map[string]bool{}
	for _, a := range s.acks.All() {
		acked[a] = true
	}
	s.mu.Lock()
	var again []envelope
	seen := map[string]bool{}
	for i := len(s.envelopes) - 1; i >= 0; i-- { // the latest attempt of each
		e := s.envelopes[i]
		if !acked[e.id] && !seen[e.id] {
			seen[e.id] = true
			again = append([]envelope{e}, again...)
		}
	}
	s.mu.Unlock()
	var ids []string
	for _, e := range again {
		e.attempt++
		s.send(t, e)
		ids = append(ids, e.id)
	}
	return ids
}

// Disconnect asks the connected client to reconnect, as Slack does.
func (s *Server) Disconnect(t testing.TB) {
	t.Helper()
	s.WaitConnected(t)
	s.mu.Lock()
	conn := s.conn
	s.conn = nil // later envelopes wait for the new connection
	s.mu.Unlock()
	s.write(conn, map[string]any{"type": "disconnect", "reason": "refresh_requested"})
}
