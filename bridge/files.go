package bridge

import (
	"context"
	"fmt"
	"io"
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
