// Package files gives each chat a workspace directory and the files tool
// that reads, writes, lists and deletes in it. Paths are opened through
// os.Root, so "..", absolute paths and symbolic links cannot leave the
// workspace. Files people send are saved here too, and send delivers a
// workspace file to the chat.
package files

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"loadout/tools"
)

// Config configures the workspaces.
type Config struct {
	// Dir holds one workspace per chat (files.dir).
	Dir string `yaml:"dir"`
	// MaxFileBytes caps one file (files.max_file_bytes); default 20 MB.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxWorkspaceBytes caps a chat's workspace (files.max_workspace_bytes);
	// default 200 MB.
	MaxWorkspaceBytes int64 `yaml:"max_workspace_bytes"`
	// MaxChars caps the text one read returns; default 20000.
	MaxChars int `yaml:"max_chars"`
}

// Sender delivers a workspace file to a chat (a document on Telegram, an
// upload on Slack, the path in the console).
type Sender interface {
	// SendFile sends f, a workspace file opened and checked, as name;
	// it reads f from its start (at each try) and leaves it open.
	SendFile(ctx context.Context, chatKey, name string, f *os.File) error
}

// ErrCannotSend is a Sender's answer for a chat whose channel does not
// send files.
var ErrCannotSend = errors.New("this chat's channel does not send files")

// Workspaces are the chats' workspace directories.
type Workspaces struct {
	cfg Config
}

// New returns the workspaces under cfg.Dir, which it creates.
func New(cfg Config) (*Workspaces, error) {
	if cfg.Dir == "" {
		return nil, errors.New("files.dir: is required")
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 20 << 20
	}
	if cfg.MaxWorkspaceBytes <= 0 {
		cfg.MaxWorkspaceBytes = 200 << 20
	}
	if cfg.MaxChars <= 0 {
		cfg.MaxChars = 20000
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("files.dir: %w", err)
	}
	return &Workspaces{cfg: cfg}, nil
}

// Dir is the chat's workspace directory. Chat keys map to names one to
// one: letters, digits, '-' and '.' are kept, anything else is written as
// '_' and two hex digits.
func (w *Workspaces) Dir(chatKey string) string {
	var b strings.Builder
	for i := 0; i < len(chatKey); i++ {
		c := chatKey[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			b.WriteByte('_')
			b.WriteString(hex.EncodeToString([]byte{c}))
		}
	}
	return filepath.Join(w.cfg.Dir, b.String())
}

// root opens the chat's workspace, creating it.
func (w *Workspaces) root(chatKey string) (*os.Root, error) {
	dir := w.Dir(chatKey)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return os.OpenRoot(dir)
}

// Save stores r as a new file in the chat's workspace under a name made
// safe from name (a number is added when it is taken), within the caps,
// and returns the name and size. A file over a cap is removed and an
// error says which.
func (w *Workspaces) Save(ctx context.Context, chatKey, name string, r io.Reader) (string, int64, error) {
	root, err := w.root(chatKey)
	if err != nil {
		return "", 0, err
	}
	defer root.Close()
	name = safeName(name)
	ext := path.Ext(name)
	base := strings.TrimSuffix(name, ext)
	var f *os.File
	for i := 1; ; i++ {
		try := name
		if i > 1 {
			try = fmt.Sprintf("%s-%d%s", base, i, ext)
		}
		f, err = root.OpenFile(try, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			name = try
			break
		}
		if !errors.Is(err, fs.ErrExist) || i == 1000 {
			return "", 0, err
		}
	}
	used, _ := usage(root)
	limit := min(w.cfg.MaxFileBytes, w.cfg.MaxWorkspaceBytes-used)
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = &CapError{File: n > w.cfg.MaxFileBytes, Limit: limit}
	}
	if err != nil {
		root.Remove(name)
		return "", 0, err
	}
	return name, n, nil
}

// CapError is a file refused for its size.
type CapError struct {
	File  bool // the file cap, else the workspace's
	Limit int64
}

func (e *CapError) Error() string {
	if e.File {
		return fmt.Sprintf("the file is larger than %d bytes (files.max_file_bytes)", e.Limit)
	}
	return fmt.Sprintf("the chat's workspace is full: %d bytes left (files.max_workspace_bytes)", e.Limit)
}

// Path is the file's path on disk, checked to be a regular file inside
// the chat's workspace and the chat's own. What reads the file uses
// Open instead: a path opened again after the check may by then name
// another file. Path is for removing one (a heard voice note), where a
// link in its place is removed, not followed.
func (w *Workspaces) Path(chatKey, name string) (string, error) {
	root, err := w.root(chatKey)
	if err != nil {
		return "", err
	}
	defer root.Close()
	st, err := root.Stat(clean(name))
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("no file %q in the workspace", name)
	}
	if err := own(root, st); err != nil {
		return "", fmt.Errorf("%q: %w", name, err)
	}
	return filepath.Join(w.Dir(chatKey), filepath.FromSlash(clean(name))), nil
}

// Open opens a regular file of the chat's workspace for reading, checked
// as the files tool checks what it reads: inside the workspace through
// os.Root, and the chat's alone. The caller reads and closes it: the
// file checked is the file read, whatever the name points to after.
func (w *Workspaces) Open(chatKey, name string) (*os.File, error) {
	root, err := w.root(chatKey)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(clean(name))
	if err != nil {
		return nil, fmt.Errorf("no file %q in the workspace", name)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("no file %q in the workspace", name)
	}
	if err == nil {
		if err = own(root, st); err != nil {
			err = fmt.Errorf("%q: %w", name, err)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// safeName keeps a file name's base, without directories or characters
// that trouble file systems.
func safeName(name string) string {
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || strings.ContainsRune(`/\:*?"<>|`, r) {
			return '_'
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.TrimSpace(name), ".")
	if name == "" {
		name = "file"
	}
	if len(name) > 120 {
		ext := path.Ext(name)
		if len(ext) > 20 {
			ext = ""
		}
		name = name[:120-len(ext)] + ext
		for !utf8.ValidString(name) {
			name = name[:len(name)-1]
		}
	}
	return name
}

// clean turns a path the model gave into one relative to the workspace;
// os.Root refuses what would still leave it.
// It is cleaned lexically, so the file a summary names is the file the
// call opens ("a/./b" and "a/x/../b" are "a/b").
func clean(p string) string {
	return filepath.FromSlash(path.Clean(strings.ReplaceAll(p, `\`, "/")))
}

// usage is the bytes of the regular files under root.
func usage(root *os.Root) (int64, error) {
	var total int64
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total, err
}

// Image reads a picture of a chat's workspace for a model that reads
// images: one of the types it takes, at most max bytes.
func (w *Workspaces) Image(chatKey, name string, max int64) (mimeType string, data []byte, err error) {
	if mimeType = mime.TypeByExtension(strings.ToLower(filepath.Ext(name))); !IsImage(mimeType) {
		return "", nil, fmt.Errorf("%s is not a picture the model reads", name)
	}
	f, err := w.Open(chatKey, name)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if st.Size() > max {
		return "", nil, fmt.Errorf("%s is larger than %d MB", name, max>>20)
	}
	data, err = io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%s is larger than %d MB", name, max>>20)
	}
	return mimeType, data, err
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

// SaveForCaller keeps data as a new file of the calling chat's workspace
// (tools.CallerFrom(ctx)): what a tool exports for the person.
func (w *Workspaces) SaveForCaller(ctx context.Context, name string, data []byte) (string, error) {
	saved, _, err := w.Save(ctx, tools.CallerFrom(ctx).ChatKey, name, bytes.NewReader(data))
	return saved, err
}
