package drive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	gdrive "google.golang.org/api/drive/v3"
	"google.golang.org/api/googleapi"

	"loadout/backoff"
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

func (g *group) search() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_search",
		Description: "Search Drive files by name, full text, type or folder; with no filter, lists recently modified files.",
		ReadOnly:    true, Untrusted: true,
	}, func(ctx context.Context, in searchIn) (any, error) {
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
	})
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

func (g *group) get() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_get",
		Description: "Get a Drive file's metadata: name, type, size, dates, owners, link, parent folders and who has access.",
		ReadOnly:    true, Untrusted: true,
	}, func(ctx context.Context, in idIn) (any, error) {
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
	})
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

func (g *group) read() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_read",
		Description: "Read a Drive file as text: Docs and Slides as plain text, Sheets as CSV (first sheet), text files as they are; long content is cut with a note.",
		ReadOnly:    true, Untrusted: true,
		Timeout: 60 * time.Second,
	}, func(ctx context.Context, in readIn) (any, error) {
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
	})
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

type createFileIn struct {
	Name      string `json:"name" desc:"file name"`
	Content   string `json:"content" desc:"the file's text"`
	FolderID  string `json:"folder_id,omitempty" desc:"parent folder id; default My Drive"`
	MimeType  string `json:"mime_type,omitempty" desc:"default text/plain (text/csv for a spreadsheet)"`
	ConvertTo string `json:"convert_to,omitempty" desc:"import as a Google Doc or Sheet" enum:"document,spreadsheet"`
}

func (g *group) createFile() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_create_file",
		Description: "Create a Drive file from text, optionally converted to a Google Doc (from text or Markdown) or Sheet (from CSV).",
		Timeout:     60 * time.Second,
	}, func(ctx context.Context, in createFileIn) (any, error) {
		name := strings.TrimSpace(in.Name)
		if name == "" {
			return nil, google.Invalid("name", "is empty")
		}
		media := strings.TrimSpace(in.MimeType)
		if media == "" {
			media = "text/plain"
			if in.ConvertTo == "spreadsheet" {
				media = "text/csv"
			}
		} else if mt, _, err := mime.ParseMediaType(media); err != nil || !strings.Contains(mt, "/") {
			return nil, google.Invalid("mime_type", "must be a MIME type such as text/plain or text/markdown")
		}
		meta := &gdrive.File{Name: name}
		switch in.ConvertTo {
		case "":
			meta.MimeType = media
		case "document", "spreadsheet":
			meta.MimeType = googleApps + in.ConvertTo
		default:
			return nil, google.Invalid("convert_to", "must be document or spreadsheet")
		}
		if s := strings.TrimSpace(in.FolderID); s != "" {
			meta.Parents = []string{s}
		}
		f, err := google.Do(ctx, g.api, "the new file", func(svc *gdrive.Service) (*gdrive.File, error) {
			return svc.Files.Create(meta).Context(ctx).SupportsAllDrives(true).Fields(fileFields).
				Media(strings.NewReader(in.Content), googleapi.ContentType(media)).Do()
		})
		if err != nil {
			return nil, err
		}
		return toFile(f), nil
	})
}

type createFolderIn struct {
	Name     string `json:"name" desc:"folder name"`
	ParentID string `json:"parent_id,omitempty" desc:"parent folder id; default My Drive"`
}

func (g *group) createFolder() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_create_folder",
		Description: "Create a Drive folder.",
	}, func(ctx context.Context, in createFolderIn) (any, error) {
		name := strings.TrimSpace(in.Name)
		if name == "" {
			return nil, google.Invalid("name", "is empty")
		}
		meta := &gdrive.File{Name: name, MimeType: mimeFolder}
		if s := strings.TrimSpace(in.ParentID); s != "" {
			meta.Parents = []string{s}
		}
		f, err := google.Do(ctx, g.api, "the new folder", func(svc *gdrive.Service) (*gdrive.File, error) {
			return svc.Files.Create(meta).Context(ctx).SupportsAllDrives(true).Fields(fileFields).Do()
		})
		if err != nil {
			return nil, err
		}
		return toFile(f), nil
	})
}

type moveIn struct {
	FileID   string `json:"file_id" desc:"Drive file or folder id"`
	FolderID string `json:"folder_id,omitempty" desc:"move into this folder (root: My Drive)"`
	Name     string `json:"name,omitempty" desc:"new name"`
}

// sharedWith lists who besides its owners can reach folder: people,
// groups and domains by address or name, "anyone with the link".
func (g *group) sharedWith(ctx context.Context, folder string) ([]string, error) {
	folder = strings.TrimSpace(folder)
	if folder == "root" {
		return nil, nil // My Drive is the person's own
	}
	// The effect and the summary of one call both ask: one read.
	perms, err := tools.Once(ctx, "drive.shared "+folder, func() (*gdrive.PermissionList, error) {
		return google.Do(ctx, g.api, fileWhat(folder), func(svc *gdrive.Service) (*gdrive.PermissionList, error) {
			return svc.Permissions.List(folder).Context(ctx).SupportsAllDrives(true).Fields("permissions(type,role,emailAddress,domain)").Do()
		})
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range perms.Permissions {
		switch {
		case p.Role == "owner":
		case p.Type == "anyone":
			out = append(out, "anyone with the link")
		case p.Type == "domain":
			out = append(out, "everyone at "+p.Domain)
		default:
			out = append(out, p.EmailAddress)
		}
	}
	return out, nil
}

func (g *group) move() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_move",
		Description: "Move a Drive file or folder into another folder, rename it, or both.",
		// A folder shared with others shares what moves into it: such a
		// move widens access. Its sharing is read first; a move whose
		// destination cannot be read counts as one.
		EffectFor: tools.By(func(ctx context.Context, in moveIn) tools.Effect {
			if strings.TrimSpace(in.FolderID) == "" {
				return tools.EffectMutate
			}
			if others, err := g.sharedWith(ctx, in.FolderID); err != nil || len(others) > 0 {
				return tools.EffectDestructive
			}
			return tools.EffectMutate
		}),
		Summarize: tools.By(func(ctx context.Context, in moveIn) string {
			s := "Move the Drive file " + strings.TrimSpace(in.FileID)
			if f := strings.TrimSpace(in.FolderID); f != "" {
				s += " into the folder " + f
				switch others, err := g.sharedWith(ctx, f); {
				case err != nil:
					s += " (whose sharing could not be read)"
				case len(others) > 0:
					s += ", which is shared with " + tools.Names(others, 3) + ": they get access to it"
				default:
					s += " (not shared with anyone else)"
				}
			}
			if n := strings.TrimSpace(in.Name); n != "" {
				s += fmt.Sprintf(", renamed '%s'", n)
			}
			return s
		}),
	}, func(ctx context.Context, in moveIn) (any, error) {
		id := strings.TrimSpace(in.FileID)
		if id == "" {
			return nil, google.Invalid("file_id", "is empty")
		}
		folder, name := strings.TrimSpace(in.FolderID), strings.TrimSpace(in.Name)
		if folder == "" && name == "" {
			return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Give folder_id, name or both.",
				Suggestion: "Call drive_move again with the target folder_id and/or the new name."}
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		var old []string
		if folder != "" {
			var f *gdrive.File
			err = g.api.Call(ctx, fileWhat(id), func() error {
				f, err = svc.Files.Get(id).Context(ctx).SupportsAllDrives(true).Fields("parents").Do()
				return err
			})
			if err != nil {
				return nil, err
			}
			old = f.Parents
		}
		var f *gdrive.File
		err = g.api.Call(ctx, fileWhat(id), func() error {
			c := svc.Files.Update(id, &gdrive.File{Name: name}).Context(ctx).SupportsAllDrives(true).Fields(fileFields)
			if folder != "" {
				c.AddParents(folder)
				if len(old) > 0 {
					c.RemoveParents(strings.Join(old, ","))
				}
			}
			f, err = c.Do()
			return err
		})
		if err != nil {
			return nil, err
		}
		return toFile(f), nil
	})
}

type shareIn struct {
	FileID         string `json:"file_id" desc:"Drive file or folder id"`
	Role           string `json:"role" enum:"reader,commenter,writer"`
	Email          string `json:"email,omitempty" desc:"person or group to share with"`
	AnyoneWithLink bool   `json:"anyone_with_link,omitempty" desc:"share with anyone who has the link instead of an email"`
	Notify         *bool  `json:"notify,omitempty" desc:"email the person; default true"`
	Message        string `json:"message,omitempty" desc:"note in the notification email"`
}

type shareOut struct {
	FileID       string `json:"file_id"`
	PermissionID string `json:"permission_id"`
	Who          string `json:"who"`
	Role         string `json:"role"`
}

func (g *group) share() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_share",
		Description: "Share a Drive file or folder (a doc, sheet, slides, anything) with an email address or anyone with the link, as reader, commenter or writer.",
		Effect:      tools.EffectDestructive,
		Summarize: tools.By(func(_ context.Context, in shareIn) string {
			s := fmt.Sprintf("Share the Drive file %s with %s as %s", in.FileID, tools.Shorten(audience(in.Email, in.AnyoneWithLink), 200), in.Role)
			if strings.TrimSpace(in.Message) != "" && (in.Notify == nil || *in.Notify) {
				s += fmt.Sprintf(", emailing the note '%s'", tools.Shorten(in.Message, 80))
			}
			return s
		}),
	}, func(ctx context.Context, in shareIn) (any, error) {
		id := strings.TrimSpace(in.FileID)
		if id == "" {
			return nil, google.Invalid("file_id", "is empty")
		}
		switch in.Role {
		case "reader", "commenter", "writer":
		default:
			return nil, google.Invalid("role", "must be reader, commenter or writer")
		}
		email := strings.TrimSpace(in.Email)
		perm := &gdrive.Permission{Role: in.Role}
		switch {
		case email != "" && in.AnyoneWithLink:
			return nil, google.Invalid("email", "cannot be combined with anyone_with_link")
		case email != "":
			a, err := mail.ParseAddress(email)
			if err != nil || a.Address != email {
				return nil, google.Invalid("email", fmt.Sprintf("'%s' is not an email address", email))
			}
			perm.Type, perm.EmailAddress = "user", email
		case in.AnyoneWithLink:
			perm.Type = "anyone"
		default:
			return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Give email or anyone_with_link.",
				Suggestion: "Call drive_share again with the person's email address."}
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		var p *gdrive.Permission
		err = g.api.Call(ctx, fileWhat(id), func() error {
			c := svc.Permissions.Create(id, perm).Context(ctx).SupportsAllDrives(true).Fields("id,type,role,emailAddress")
			if perm.Type == "user" {
				notify := in.Notify == nil || *in.Notify
				c.SendNotificationEmail(notify)
				if notify && in.Message != "" {
					c.EmailMessage(in.Message)
				}
			}
			p, err = c.Do()
			return err
		})
		if err != nil {
			return nil, err
		}
		return shareOut{FileID: id, PermissionID: p.Id, Who: audience(p.EmailAddress, p.Type == "anyone"), Role: p.Role}, nil
	})
}

// audience names whom a share reaches: anyone with the link, or email.
func audience(email string, anyone bool) string {
	if anyone {
		return "anyone with the link"
	}
	return email
}

type trashOut struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Trashed bool   `json:"trashed"`
}

func (g *group) trash() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_trash",
		Description: "Move a Drive file or folder to the trash, where it can be restored for 30 days.",
		Effect:      tools.EffectDestructive,
		Summarize: tools.By(func(_ context.Context, in idIn) string {
			return "Move the Drive file " + in.FileID + " to the trash"
		}),
	}, func(ctx context.Context, in idIn) (any, error) {
		id := strings.TrimSpace(in.FileID)
		if id == "" {
			return nil, google.Invalid("file_id", "is empty")
		}
		f, err := google.Do(ctx, g.api, fileWhat(id), func(svc *gdrive.Service) (*gdrive.File, error) {
			return svc.Files.Update(id, &gdrive.File{Trashed: true}).Context(ctx).SupportsAllDrives(true).Fields("id,name,trashed").Do()
		})
		if err != nil {
			return nil, err
		}
		return trashOut{ID: f.Id, Name: f.Name, Trashed: f.Trashed}, nil
	})
}

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

type unshareIn struct {
	FileID         string `json:"file_id" desc:"Drive file or folder id"`
	Email          string `json:"email,omitempty" desc:"the person or group to take access from"`
	AnyoneWithLink bool   `json:"anyone_with_link,omitempty" desc:"stop sharing with anyone who has the link"`
}

func (g *group) unshare() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_unshare",
		Description: "Stop sharing a Drive file or folder with an email address, or with anyone who has the link.",
		Effect:      tools.EffectDestructive,
		Summarize: tools.By(func(_ context.Context, in unshareIn) string {
			return fmt.Sprintf("Take away %s's access to the Drive file %s", tools.Shorten(audience(in.Email, in.AnyoneWithLink), 80), in.FileID)
		}),
	}, func(ctx context.Context, in unshareIn) (any, error) {
		id := strings.TrimSpace(in.FileID)
		email := strings.ToLower(strings.TrimSpace(in.Email))
		switch {
		case id == "":
			return nil, google.Invalid("file_id", "is empty")
		case email != "" && in.AnyoneWithLink:
			return nil, google.Invalid("email", "cannot be combined with anyone_with_link")
		case email == "" && !in.AnyoneWithLink:
			return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Give email or anyone_with_link."}
		}
		svc, err := g.api.Connect(ctx)
		if err != nil {
			return nil, err
		}
		var perms *gdrive.PermissionList
		if err := g.api.Call(ctx, fileWhat(id), func() (err error) {
			perms, err = svc.Permissions.List(id).Context(ctx).SupportsAllDrives(true).Fields("permissions(id,type,role,emailAddress)").Do()
			return err
		}); err != nil {
			return nil, err
		}
		var removed []string
		for _, p := range perms.Permissions {
			match := (in.AnyoneWithLink && p.Type == "anyone") || (email != "" && strings.ToLower(p.EmailAddress) == email)
			if !match || p.Role == "owner" {
				continue
			}
			if err := g.api.Call(ctx, fileWhat(id), func() error {
				return svc.Permissions.Delete(id, p.Id).Context(ctx).SupportsAllDrives(true).Do()
			}); err != nil {
				return nil, err
			}
			removed = append(removed, p.Role)
		}
		if len(removed) == 0 {
			return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("The file is not shared with %s (owners cannot be removed).", audience(email, in.AnyoneWithLink)),
				Suggestion: "Check who has access with drive_get."}
		}
		return map[string]any{"status": "unshared", "file_id": id, "removed": len(removed)}, nil
	})
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

func (g *group) export() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "drive_export",
		Description: "Export a Google Doc, Sheet or Slides as text, Markdown or CSV, or as PDF or Office into the chat's files.",
		Timeout:     90 * time.Second,
	}, func(ctx context.Context, in exportIn) (any, error) {
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
	})
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
