package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotRunning is returned by Notify before Run has connected.
var ErrNotRunning = errors.New("telegram: the channel is not connected")

// Notify sends text, as a reply would be formatted, to the chat (and forum
// topic) that chatKey names, e.g. "telegram:-100123:7". Other parts use it
// to tell a person something outside a turn, such as a finished account
// connection.
func (a *Adapter) Notify(ctx context.Context, chatKey, text string) error {
	rest, ok := strings.CutPrefix(chatKey, "telegram:")
	if !ok {
		return fmt.Errorf("telegram: %q is not a Telegram chat key", chatKey)
	}
	chatPart, threadPart, _ := strings.Cut(rest, ":")
	id, err := strconv.ParseInt(chatPart, 10, 64)
	if err != nil {
		return fmt.Errorf("telegram: bad chat key %q", chatKey)
	}
	r := routeInfo{ChatID: id}
	if threadPart != "" {
		if r.ThreadID, err = strconv.Atoi(threadPart); err != nil {
			return fmt.Errorf("telegram: bad chat key %q", chatKey)
		}
	}
	a.mu.Lock()
	connected := a.bot != nil
	a.mu.Unlock()
	if !connected {
		return ErrNotRunning
	}
	return a.sendReply(ctx, r, text)
}
