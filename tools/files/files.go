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
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
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

type input struct {
	Action  string `json:"action" enum:"list,read,write,append,delete,send" desc:"what to do"`
	Path    string `json:"path,omitempty" desc:"file path in the chat's workspace" reach:"path"`
	Content string `json:"content,omitempty" desc:"text for write or append"`
	Offset  int    `json:"offset,omitempty" desc:"for read: character to start at"`
}

type entry struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
}

type listing struct {
	Files []entry `json:"files"`
	Used  int64   `json:"used_bytes"`
	Limit int64   `json:"limit_bytes"`
}

type content struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	Content    string `json:"content,omitempty"`
	TotalChars int    `json:"total_chars,omitempty"`
	NextOffset int    `json:"next_offset,omitempty"`
	Note       string `json:"note,omitempty"`
}

type done struct {
	Status string `json:"status"`
	Path   string `json:"path"`
	Size   int64  `json:"size,omitempty"`
}

// Tool is the files tool; send needs a Sender (nil: send says it is not
// available here).
func (w *Workspaces) Tool(sender Sender) tools.Tool {
	return tools.New(tools.Definition{
		Name:        "files",
		Examples:    []string{"save text into a file here", "show the files in this chat", "read a file the person uploaded", "send the file back to me", "delete a file from the chat workspace", "add lines to the end of a file", "what have I uploaded so far", "open the text file I gave you", "write the results to a csv here", "attach the file to your reply", "get rid of the old file in our folder", "which documents are stored in this conversation", "the spreadsheet I sent you earlier", "the attachment I sent earlier", "keep a copy of this in our shared folder", "delete the temporary files you made", "send me the file you created", "look inside the spreadsheet file I uploaded", "save your answer to a file I can download"},
		Description: "Files in this chat's workspace, such as those the person sent: list, read, write, append, delete, send to the person.",
		EffectFor: tools.By(func(_ context.Context, in input) tools.Effect {
			switch in.Action {
			case "list", "read", "send":
				// Sending shows the person a file of their own chat,
				// as a reply does.
				return tools.EffectRead
			case "delete":
				return tools.EffectDestructive
			}
			return tools.EffectMutate
		}),
		Summarize: tools.By(func(_ context.Context, in input) string {
			switch in.Action {
			case "delete":
				return fmt.Sprintf("Delete the file '%s' from this chat's workspace", filepath.ToSlash(clean(in.Path)))
			case "write", "append":
				return fmt.Sprintf("%s %d characters to the file '%s' in this chat's workspace", strings.ToUpper(in.Action[:1])+in.Action[1:], utf8.RuneCountInString(in.Content), filepath.ToSlash(clean(in.Path)))
			case "send":
				return fmt.Sprintf("Send the file '%s' to this chat", filepath.ToSlash(clean(in.Path)))
			}
			return ""
		}),
		// A file in the workspace may be one someone sent, or a page
		// saved from the web.
		UntrustedFor: tools.By(func(_ context.Context, in input) bool { return in.Action == "read" }),
		Timeout:      30 * time.Second,
	}, func(ctx context.Context, in input) (any, error) {
		chatKey := tools.CallerFrom(ctx).ChatKey
		if chatKey == "" {
			return nil, errors.New("files: no chat in the context")
		}
		if in.Action != "list" && strings.TrimSpace(in.Path) == "" {
			return nil, tools.MissingParameter("files", in.Action, "path")
		}
		root, err := w.root(chatKey)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		p := clean(in.Path)
		switch in.Action {
		case "list":
			return w.list(root)
		case "read":
			return w.read(root, p, in.Path, max(in.Offset, 0))
		case "write", "append":
			return w.write(root, p, in.Path, in.Content, in.Action == "append")
		case "delete":
			if err := root.Remove(p); err != nil {
				return nil, fileError(err, in.Path)
			}
			return done{Status: "deleted", Path: in.Path}, nil
		case "send":
			if sender == nil {
				return nil, &tools.Error{Code: "not_available", Message: "Files cannot be sent in this chat."}
			}
			// The file checked is the file sent: the channel gets it
			// open, never its path to open again.
			f, err := root.Open(p)
			if err != nil {
				return nil, fileError(err, in.Path)
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil || !st.Mode().IsRegular() {
				return nil, fileError(orNotExist(err), in.Path)
			}
			if err := own(root, st); err != nil {
				return nil, fileError(err, in.Path)
			}
			err = sender.SendFile(ctx, chatKey, path.Base(filepath.ToSlash(p)), f)
			if errors.Is(err, ErrCannotSend) {
				return nil, &tools.Error{Code: "not_available", Message: "Files cannot be sent in this chat.",
					Suggestion: "Tell the person the file is in the workspace as " + in.Path + "."}
			}
			if err != nil {
				return nil, fmt.Errorf("send %s: %w", in.Path, err)
			}
			return done{Status: "sent", Path: in.Path, Size: st.Size()}, nil
		}
		return nil, tools.UnknownAction("files", in.Action, "list", "read", "write", "append", "delete", "send")
	})
}

func orNotExist(err error) error {
	if err == nil {
		return fs.ErrNotExist
	}
	return err
}

func (w *Workspaces) list(root *os.Root) (any, error) {
	out := listing{Files: []entry{}, Limit: w.cfg.MaxWorkspaceBytes}
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		out.Used += info.Size()
		if len(out.Files) < 500 {
			out.Files = append(out.Files, entry{Path: p, Size: info.Size(), Modified: info.ModTime().UTC().Format(time.RFC3339)})
		}
		return nil
	})
	sort.Slice(out.Files, func(i, j int) bool { return out.Files[i].Path < out.Files[j].Path })
	return out, err
}

func (w *Workspaces) read(root *os.Root, p, shown string, offset int) (any, error) {
	f, err := root.Open(p)
	if err != nil {
		return nil, fileError(err, shown)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, fileError(orNotExist(err), shown)
	}
	if err := own(root, st); err != nil {
		return nil, fileError(err, shown)
	}
	// A read looks at no more than the text it could return.
	buf, err := io.ReadAll(io.LimitReader(f, int64(offset+w.cfg.MaxChars)*4+4))
	if err != nil {
		return nil, err
	}
	out := content{Path: shown, Size: st.Size(), Type: fileType(p, buf)}
	if !utf8.Valid(trimPartial(buf)) || bytes.IndexByte(buf, 0) >= 0 {
		out.Note = fmt.Sprintf("A binary file (%s) of %d bytes; it cannot be shown as text. It can be sent to the person.", out.Type, st.Size())
		return out, nil
	}
	text := string(trimPartial(buf))
	out.Content, out.TotalChars, out.NextOffset = tools.Window(text, offset, w.cfg.MaxChars)
	if out.NextOffset > 0 || int64(len(buf)) < st.Size() {
		if out.NextOffset == 0 {
			out.NextOffset = offset + utf8.RuneCountInString(out.Content)
		}
		out.TotalChars = 0
		out.Note = fmt.Sprintf("More follows: read again with offset %d.", out.NextOffset)
	}
	return out, nil
}

func (w *Workspaces) write(root *os.Root, p, shown, text string, appendTo bool) (any, error) {
	if dir := filepath.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return nil, fileError(err, shown)
		}
	}
	var old int64
	if st, err := root.Stat(p); err == nil {
		if !st.Mode().IsRegular() {
			return nil, fileError(fs.ErrInvalid, shown)
		}
		old = st.Size()
	}
	size := int64(len(text))
	if appendTo {
		size += old
	}
	used, _ := usage(root)
	switch {
	case size > w.cfg.MaxFileBytes:
		return nil, &tools.Error{Code: "too_large", Message: fmt.Sprintf("The file would be %d bytes; files are limited to %d.", size, w.cfg.MaxFileBytes)}
	case used-old+size > w.cfg.MaxWorkspaceBytes:
		return nil, &tools.Error{Code: "too_large", Message: fmt.Sprintf("The workspace would hold %d bytes; it is limited to %d.", used-old+size, w.cfg.MaxWorkspaceBytes),
			Suggestion: "Delete files that are no longer needed."}
	}
	flag := os.O_WRONLY | os.O_CREATE
	if appendTo {
		flag |= os.O_APPEND
	}
	f, err := root.OpenFile(p, flag, 0o600)
	if err != nil {
		return nil, fileError(err, shown)
	}
	// The file opened is checked, not the name: nothing is changed in a
	// file that is not the chat's alone.
	st, err := f.Stat()
	if err == nil {
		err = own(root, st)
	}
	if err == nil && !appendTo {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, fileError(err, shown)
	}
	_, err = io.WriteString(f, text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	status := "written"
	if appendTo {
		status = "appended"
	}
	return done{Status: status, Path: shown, Size: size}, nil
}

// errNotOwn is a file that is not the chat's alone (see own).
var errNotOwn = errors.New("the file is linked from outside this chat's workspace")

// fileError explains a failed path to the model.
func fileError(err error, p string) error {
	switch {
	case errors.Is(err, errNotOwn):
		return &tools.Error{Code: tools.CodePermission, Message: fmt.Sprintf("'%s' is linked from outside this chat's workspace (a hard link or a mount), so it is not used.", p),
			Suggestion: "Tell the person only the chat's own files can be read, written or sent; delete the link with files delete."}
	case errors.Is(err, fs.ErrNotExist):
		return &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("There is no file '%s' in this chat's workspace.", p),
			Suggestion: "Call files with action list to see the files."}
	case strings.Contains(err.Error(), "escapes") || strings.Contains(err.Error(), "path escapes from parent"),
		errors.Is(err, fs.ErrInvalid), errors.Is(err, fs.ErrPermission):
		return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not a file inside this chat's workspace.", p),
			Suggestion: "Use a relative path such as notes/todo.md; .., absolute paths and links out of the workspace are refused."}
	}
	return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' cannot be used: %s.", p, strings.TrimPrefix(err.Error(), "openat "))}
}

// fileType guesses a media type from the name, then the content.
func fileType(name string, head []byte) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		t, _, _ = mime.ParseMediaType(t)
		return t
	}
	t, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	return t
}

// trimPartial drops a character cut at the end of a read.
func trimPartial(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// Register adds the files group, sending through sender.
func (w *Workspaces) Register(reg *tools.Registry, sender Sender) error {
	return reg.AddGroup(tools.Group{Name: "files", DisplayName: "Files",
		Description: "This chat's files: read, write, list, delete, send"}, w.Tool(sender))
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
