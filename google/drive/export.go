package drive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	gdrive "google.golang.org/api/drive/v3"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// Download reads a Drive file's bytes, up to max, acting as the caller
// in ctx, for other groups (pdf) that take a Drive file id. It returns
// the file's name and its type.
func Download(ctx context.Context, c google.Client, fileID string, max int64) (name, mimeType string, data []byte, err error) {
	api := newAPI(c, backoff.Policy{})
	svc, err := api.Connect(ctx)
	if err != nil {
		return "", "", nil, err
	}
	var f *gdrive.File
	err = api.Call(ctx, fileWhat(fileID), func() error {
		f, err = svc.Files.Get(fileID).Context(ctx).SupportsAllDrives(true).Fields("id,name,mimeType,size").Do()
		return err
	})
	if err != nil {
		return "", "", nil, err
	}
	tooLarge := &tools.Error{Code: "too_large", Message: fmt.Sprintf("'%s' is larger than %d bytes.", f.Name, max)}
	// A stored file's size is known: one over the cap is not fetched at
	// all. The read is capped still, for files Drive gives no size.
	if f.Size > max {
		return "", "", nil, tooLarge
	}
	err = api.Call(ctx, fileWhat(fileID), func() error {
		resp, err := svc.Files.Get(fileID).Context(ctx).SupportsAllDrives(true).Download()
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
		return err
	})
	if err != nil {
		return "", "", nil, err
	}
	if int64(len(data)) > max {
		return "", "", nil, tooLarge
	}
	return f.Name, f.MimeType, data, nil
}

// exports are the formats drive_export makes of Google's own files.
var exports = map[string]map[string]string{
	mimeDocument:     {"text": "text/plain", "markdown": "text/markdown", "pdf": "application/pdf", "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
	mimeSpreadsheet:  {"csv": "text/csv", "pdf": "application/pdf", "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
	mimePresentation: {"text": "text/plain", "pdf": "application/pdf", "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
}

type exportIn struct {
	FileID string `json:"file_id"`
	Format string `json:"format" enum:"text,markdown,csv,pdf,docx,xlsx,pptx" desc:"text/markdown/csv come back as text; the others are saved in the chat's files"`
}

func (g *group) export(ctx context.Context, in exportIn) (any, error) {
	id := strings.TrimSpace(in.FileID)
	if id == "" {
		return nil, google.Invalid("file_id", "is empty")
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var f *gdrive.File
	if err := g.api.Call(ctx, fileWhat(id), func() (err error) {
		f, err = svc.Files.Get(id).Context(ctx).SupportsAllDrives(true).Fields("id,name,mimeType").Do()
		return err
	}); err != nil {
		return nil, err
	}
	formats, ok := exports[f.MimeType]
	if !ok {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is a %s file; only Google Docs, Sheets and Slides can be exported.", f.Name, friendlyType(f.MimeType)),
			Suggestion: "Read it with drive_read, or give the person its link."}
	}
	mime, ok := formats[in.Format]
	if !ok {
		allowed := make([]string, 0, len(formats))
		for k := range formats {
			allowed = append(allowed, k)
		}
		sort.Strings(allowed)
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("A %s cannot be exported as %s.", friendlyType(f.MimeType), in.Format),
			Suggestion: "Use one of: " + strings.Join(allowed, ", "), Details: map[string]any{"allowed_values": allowed}}
	}
	textual := in.Format == "text" || in.Format == "markdown" || in.Format == "csv"
	if !textual && g.opts.Save == nil {
		return nil, &tools.Error{Code: "not_available", Message: "Files cannot be saved here, so only text, markdown and csv exports work."}
	}
	var data []byte
	if err := g.api.Call(ctx, fileWhat(id), func() error {
		resp, err := svc.Files.Export(id, mime).Context(ctx).Download()
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxExport+1))
		return err
	}); err != nil {
		return nil, err
	}
	if len(data) > maxExport {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("The export of '%s' is larger than %d MB.", f.Name, maxExport>>20)}
	}
	if textual {
		text, more, _ := readChars(bytes.NewReader(data), 0, g.opts.MaxReadChars)
		out := map[string]any{"file_id": f.Id, "name": f.Name, "format": in.Format, "content": text}
		if more {
			out["note"] = fmt.Sprintf("Only the first %d characters are shown; drive_read reads on with offset.", g.opts.MaxReadChars)
		}
		return out, nil
	}
	name := exportName(f.Name, in.Format)
	saved, err := g.opts.Save(ctx, name, data)
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "exported", "file": saved, "bytes": len(data),
		"note": "Saved in this chat's files; send it to the person with the files tool (action send)."}, nil
}

// maxExport bounds an export's size (Google's own limit is 10 MB).
const maxExport = 20 << 20

// exportName is a file name for an export: the file's name without
// characters a path cannot hold, and the format's extension.
func exportName(name, format string) string {
	clean := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 || r < ' ' {
			return '_'
		}
		return r
	}, strings.TrimSpace(name))
	if clean == "" || clean == "." || clean == ".." {
		clean = "export"
	}
	return clean + "." + format
}
