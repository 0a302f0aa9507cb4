package irctest

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// Holder holds the bot's messages to people on their way to the server,
// to stop the bot in the middle of an answer: Wrap is the channel's
// Config.Conn. The zero value holds nothing.
type Holder struct {
	Gate bridgetest.Gate
}

// holdKey is the gate's key: the bot's PRIVMSG lines.
const holdKey = "PRIVMSG"

// Hold lets the bot's next n messages through and holds later ones.
func (h *Holder) Hold(n int) { h.Gate.Hold(holdKey, n) }

// Release waits until no message is held by a connection that closed,
// then lets held and later messages through.
func (h *Holder) Release(t testing.TB) {
	bridgetest.WaitFor(t, "the held message to be abandoned", &h.Gate.Signal, func() bool { return h.Gate.Waiting(holdKey) == 0 })
	h.Gate.Release(holdKey)
}

// Wrap wraps the bot's connection.
func (h *Holder) Wrap(c net.Conn) net.Conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &held{Conn: c, h: h, ctx: ctx, cancel: cancel}
}

// held is a connection whose PRIVMSG lines pass the Holder's gate. A
// held write ends, unwritten, when the connection closes or its write
// deadline passes.
type held struct {
	net.Conn
	h      *Holder
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	timer  *time.Timer
}

func (c *held) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), holdKey+" ") && !c.h.Gate.Pass(c.ctx, holdKey) {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *held) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	if !t.IsZero() {
		c.timer = time.AfterFunc(time.Until(t), c.cancel)
	}
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *held) Close() error {
	c.cancel()
	return c.Conn.Close()
}
