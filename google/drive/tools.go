package drive

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	gdrive "google.golang.org/api/drive/v3"

	"loadout/google"
	"loadout/tools"
)

type searchIn struct {
	Name       string `json:"name,omitempty" desc:"text the file name contains"`
	Text       string `json:"text,omitempty" desc:"full-text search in content and name"`
	Type       string `json:"type,omitempty" desc:"file type" enum:"document,spreadsheet,presentation,folder,form,pdf,image,video,text"`
	FolderID   string `json:"folder_id,omitempty" desc:"only files directly in this folder (root: My Drive)"`
	MaxResults int    `json:"max_results,omitempty" desc:"1-100, default 20"`
	PageToken  string `json:"page_token,omitempty" desc:"next_page_token from a previous search"`
}

type searchOut struct {
	Files         []file `json:"files"`
	NextPageToken string `json:"next_page_token,omitempty"`
}

func (g *group) search(ctx context.Context, in searchIn) (any, error) {
	q := []string{"trashed = false"}
	if s := strings.TrimSpace(in.Name); s != "" {
		q = append(q, "name contains "+quote(s))
	}
	text := strings.TrimSpace(in.Text)
	if text != "" {
		q = append(q, "fullText contains "+quote(text))
	}
	if in.Type != "" {
		c := typeQuery(in.Type)
		if c == "" {
			return nil, google.Invalid("type", "must be one of "+friendlyTypes)
		}
		q = append(q, c)
	}
	if s := strings.TrimSpace(in.FolderID); s != "" {
		q = append(q, quote(s)+" in parents")
	}
	size := in.MaxResults
	switch {
	case size == 0:
		size = 20
	case size < 1 || size > 100:
		return nil, google.Invalid("max_results", "must be between 1 and 100")
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var res *gdrive.FileList
	err = g.api.Call(ctx, "the Drive search", func() error {
		c := svc.Files.List().Context(ctx).Q(strings.Join(q, " and ")).PageSize(int64(size)).
			SupportsAllDrives(true).IncludeItemsFromAllDrives(true).
			Fields("nextPageToken", "files("+fileFields+")")
		if text == "" {
			// Drive refuses a sort order with full-text terms.
			c.OrderBy("modifiedTime desc")
		}
		if in.PageToken != "" {
			c.PageToken(in.PageToken)
		}
		res, err = c.Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := searchOut{Files: make([]file, 0, len(res.Files)), NextPageToken: res.NextPageToken}
	for _, f := range res.Files {
		ff := toFile(f)
		ff.Parents = nil
		out.Files = append(out.Files, ff)
	}
	return out, nil
}

type idIn struct {
	FileID string `json:"file_id" desc:"Drive file id"`
}

type access struct {
	Who  string `json:"who"`
	Role string `json:"role"`
	ID   string `json:"permission_id"`
}

type detail struct {
	file
	MimeType    string   `json:"mime_type"`
	Created     string   `json:"created,omitempty"`
	Owners      []string `json:"owners,omitempty"`
	Description string   `json:"description,omitempty"`
	Shared      bool     `json:"shared,omitempty"`
	Trashed     bool     `json:"trashed,omitempty"`
	Access      []access `json:"access,omitempty"`
	ShortcutTo  string   `json:"shortcut_to,omitempty"`
}

func (g *group) get(ctx context.Context, in idIn) (any, error) {
	id := strings.TrimSpace(in.FileID)
	if id == "" {
		return nil, google.Invalid("file_id", "is empty")
	}
	f, err := google.Do(ctx, g.api, fileWhat(id), func(svc *gdrive.Service) (*gdrive.File, error) {
		return svc.Files.Get(id).Context(ctx).SupportsAllDrives(true).Fields(
			fileFields + ",createdTime,owners(displayName,emailAddress),description,shared,trashed," +
				"permissions(id,type,role,emailAddress,domain),shortcutDetails").Do()
	})
	if err != nil {
		return nil, err
	}
	d := detail{file: toFile(f), MimeType: f.MimeType, Created: shortTime(f.CreatedTime),
		Description: f.Description, Shared: f.Shared, Trashed: f.Trashed}
	for _, o := range f.Owners {
		d.Owners = append(d.Owners, person(o.DisplayName, o.EmailAddress))
	}
	for _, p := range f.Permissions {
		who := p.EmailAddress
		switch p.Type {
		case "anyone":
			who = "anyone with the link"
		case "domain":
			who = "everyone at " + p.Domain
		}
		d.Access = append(d.Access, access{Who: who, Role: p.Role, ID: p.Id})
	}
	if f.ShortcutDetails != nil {
		d.ShortcutTo = f.ShortcutDetails.TargetId
	}
	return d, nil
}

func person(name, email string) string {
	switch {
	case name == "":
		return email
	case email == "":
		return name
	}
	return name + " <" + email + ">"
}

type readIn struct {
	FileID   string `json:"file_id" desc:"Drive file id"`
	Offset   int    `json:"offset,omitempty" desc:"characters to skip, to continue a cut read"`
	MaxChars int    `json:"max_chars,omitempty" desc:"default and maximum 100000"`
}

type readOut struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Content    string `json:"content"`
	Truncated  bool   `json:"truncated,omitempty"`
	NextOffset int    `json:"next_offset,omitempty"`
	Note       string `json:"note,omitempty"`
}

// exportType is the text format a Google-native file is exported as; ""
// when it has none.
func exportType(mimeType string) string {
	switch mimeType {
	case mimeDocument, mimePresentation:
		return "text/plain"
	case mimeSpreadsheet:
		return "text/csv"
	}
	return ""
}

// textual reports whether a stored file's MIME type is text worth reading.
func textual(mimeType string) bool {
	mt, _, _ := mime.ParseMediaType(mimeType)
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-javascript",
		"application/x-sh", "application/x-yaml", "application/yaml", "application/sql", "application/x-httpd-php",
		"application/octet-stream":
		return true
	}
	return false
}

func (g *group) read(ctx context.Context, in readIn) (any, error) {
	id := strings.TrimSpace(in.FileID)
	if id == "" {
		return nil, google.Invalid("file_id", "is empty")
	}
	limit := in.MaxChars
	switch {
	case limit == 0:
		limit = g.opts.MaxReadChars
	case limit < 1 || limit > g.opts.MaxReadChars:
		return nil, google.Invalid("max_chars", fmt.Sprintf("must be between 1 and %d", g.opts.MaxReadChars))
	}
	if in.Offset < 0 {
		return nil, google.Invalid("offset", "must not be negative")
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var f *gdrive.File
	for hop := 0; ; hop++ {
		err = g.api.Call(ctx, fileWhat(id), func() error {
			f, err = svc.Files.Get(id).Context(ctx).SupportsAllDrives(true).Fields("id,name,mimeType,size,shortcutDetails").Do()
			return err
		})
		if err != nil {
			return nil, err
		}
		if f.MimeType != mimeShortcut || f.ShortcutDetails == nil || hop > 0 {
			break
		}
		id = f.ShortcutDetails.TargetId
	}
	out := readOut{ID: f.Id, Name: f.Name, Type: friendlyType(f.MimeType)}
	export := exportType(f.MimeType)
	if export == "" && !textual(f.MimeType) {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument,
			Message:    fmt.Sprintf("'%s' is a %s file, which cannot be read as text.", f.Name, friendlyType(f.MimeType)),
			Suggestion: "Only Google Docs, Sheets, Slides and text files can be read; give the person the file's link instead."}
	}
	var text string
	var more bool
	err = g.api.Call(ctx, fileWhat(id), func() error {
		var resp *http.Response
		if export != "" {
			resp, err = svc.Files.Export(id, export).Context(ctx).Download()
		} else {
			resp, err = svc.Files.Get(id).Context(ctx).SupportsAllDrives(true).Download()
		}
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		text, more, err = readChars(resp.Body, in.Offset, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument,
			Message:    fmt.Sprintf("'%s' is not a text file.", f.Name),
			Suggestion: "Give the person the file's link instead."}
	}
	out.Content = text
	if more {
		out.Truncated = true
		out.NextOffset = in.Offset + utf8.RuneCountInString(text)
		out.Note = fmt.Sprintf("Only %d characters are shown; call again with offset %d for more.", utf8.RuneCountInString(text), out.NextOffset)
	}
	if f.MimeType == mimeSpreadsheet {
		out.Note = strings.TrimSpace("Only the first sheet is exported as CSV; sheets_read (group google_sheets) reads any sheet. " + out.Note)
	}
	return out, nil
}

// readChars skips offset characters of r and returns up to limit more,
// and whether anything follows them. A multi-byte character cut by the
// reader's end is kept whole.
func readChars(r io.Reader, offset, limit int) (string, bool, error) {
	// Four bytes per character at most, plus one to see if more follows.
	b, err := io.ReadAll(io.LimitReader(r, int64(offset+limit)*4+1))
	if err != nil {
		return "", false, fmt.Errorf("drive: read content: %w", err)
	}
	s := string(b)
	for i := 0; i < offset && s != ""; i++ {
		_, n := utf8.DecodeRuneInString(s)
		s = s[n:]
	}
	end, count := 0, 0
	for end < len(s) && count < limit {
		_, n := utf8.DecodeRuneInString(s[end:])
		end += n
		count++
	}
	return s[:end], end < len(s), nil
}
