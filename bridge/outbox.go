package bridge

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// FileSaver keeps a file a person sent in the chat's workspace, under a
// safe name it returns with the size.
type FileSaver interface {
	Save(ctx context.Context, chatKey, name string, r io.Reader) (saved string, size int64, err error)
}

// FileNote is what the model reads about a file a person sent: its name
// in the workspace, its type and size.
func FileNote(saved, mimeType string, size int64) string {
	return fmt.Sprintf("[The person sent a file, saved in this chat's workspace as %s (%s, %s). The files tool reads it.]", saved, mimeType, humanSize(size))
}

// IsImage reports whether a file of mimeType is a picture a model that
// reads images can be shown.
func IsImage(mimeType string) bool {
	switch mimeType {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return true
	}
	return false
}

// FileNotKept is the model's note for a file that could not be kept.
func FileNotKept(name, why string) string {
	return fmt.Sprintf("[The person sent a file, %s, but it could not be kept: %s.]", name, why)
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// SendFunc sends text to the chat named by chatKey.
type SendFunc func(ctx context.Context, chatKey, text string) error

// FileFunc sends the file at path, named name, to the chat named by
// chatKey.
type FileFunc func(ctx context.Context, chatKey, name, path string) error

// Outbox routes a message for a chat to the channel that owns the chat
// key's prefix ("telegram:…" to Telegram, "slack:…" to Slack), so parts
// other than channels (the Google connect callback, for one) can tell a
// person something outside a turn. The zero value is ready; it is safe for
// concurrent use.
type Outbox struct {
	mu      sync.RWMutex
	send    map[string]SendFunc
	files   map[string]FileFunc
	submits map[string]SubmitFunc
}

// SubmitFunc hands a scheduled task's message to a chat as if its person
// had sent it, under an id its inbox dedupes by; its turn runs
// unattended (Pending.Unattended).
type SubmitFunc func(ctx context.Context, chatKey, userKey, id, text string) error

// AddSubmit makes f the submitter for chat keys that start with prefix
// + ":".
func (o *Outbox) AddSubmit(prefix string, f SubmitFunc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.submits == nil {
		o.submits = map[string]SubmitFunc{}
	}
	o.submits[prefix] = f
}

// Submit hands a message to chatKey's channel; it fails when no running
// channel owns the key.
func (o *Outbox) Submit(ctx context.Context, chatKey, userKey, id, text string) error {
	prefix, _, _ := strings.Cut(chatKey, ":")
	o.mu.RLock()
	f := o.submits[prefix]
	o.mu.RUnlock()
	if f == nil {
		return fmt.Errorf("no running channel delivers to %s", chatKey)
	}
	return f(ctx, chatKey, userKey, id, text)
}

// AddFiles makes f the file sender for chat keys that start with prefix
// + ":".
func (o *Outbox) AddFiles(prefix string, f FileFunc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.files == nil {
		o.files = map[string]FileFunc{}
	}
	o.files[prefix] = f
}

// ErrNoFiles is SendFile's error for a chat whose channel cannot send
// files.
var ErrNoFiles = fmt.Errorf("bridge: this chat's channel does not send files")

// SendFile sends a file to chatKey through its channel.
func (o *Outbox) SendFile(ctx context.Context, chatKey, name, path string) error {
	prefix, _, _ := strings.Cut(chatKey, ":")
	o.mu.RLock()
	f := o.files[prefix]
	o.mu.RUnlock()
	if f == nil {
		return ErrNoFiles
	}
	return f(ctx, chatKey, name, path)
}

// Add makes f the sender for chat keys that start with prefix + ":".
func (o *Outbox) Add(prefix string, f SendFunc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.send == nil {
		o.send = map[string]SendFunc{}
	}
	o.send[prefix] = f
}

// Notify sends text to chatKey through its channel. It fails if no running
// channel owns the key.
func (o *Outbox) Notify(ctx context.Context, chatKey, text string) error {
	prefix, _, _ := strings.Cut(chatKey, ":")
	o.mu.RLock()
	f := o.send[prefix]
	o.mu.RUnlock()
	if f == nil {
		return fmt.Errorf("bridge: no channel delivers to %q", chatKey)
	}
	return f(ctx, chatKey, text)
}
