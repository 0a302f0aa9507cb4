package irc

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// The harness holds the bot's own lines on their way out (the server
// is real: it cannot hold them), with the kit's Gate.

// holder holds the bot's messages to people on their way to the server,
// to stop the bot in the middle of an answer: Wrap is the channel's
// Config.Conn. The zero value holds nothing.
type holder struct {
	Gate bridgetest.Gate
}

// holdKey is the gate's key: the bot's PRIVMSG lines.
const holdKey = "PRIVMSG"

// Hold lets the bot's next n messages through and holds later ones.
func (h *holder) Hold(n int) { h.Gate.Hold(holdKey, n) }

// Release waits until no message is held by a connection that closed,
// then lets held and later messages through.
func (h *holder) Release(t testing.TB) {
	bridgetest.WaitFor(t, "the held message to be abandoned", &h.Gate.Signal, func() bool { return h.Gate.Waiting(holdKey) == 0 })
	h.Gate.Release(holdKey)
}

// Wrap wraps the bot's connection.
func (h *holder) Wrap(c net.Conn) net.Conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &held{Conn: c, h: h, ctx: ctx, cancel: cancel}
}

// held is a connection whose PRIVMSG lines pass the holder's gate. A
// held write ends, unwritten, when the connection closes or a write
// deadline is set that has passed (the bot giving up on a line).
type held struct {
	net.Conn
	h      *holder
	ctx    context.Context
	cancel context.CancelFunc
}

func (c *held) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), holdKey+" ") && !c.h.Gate.Pass(c.ctx, holdKey) {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *held) SetWriteDeadline(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		c.cancel()
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *held) Close() error {
	c.cancel()
	return c.Conn.Close()
}
