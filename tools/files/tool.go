package files

import (
	"bytes"
	"context"
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
