package drive

import (
	"context"
	"mime"
	"strings"

	gdrive "google.golang.org/api/drive/v3"
	"google.golang.org/api/googleapi"

	"loadout/google"
	"loadout/tools"
)

type createFileIn struct {
	Name      string `json:"name" desc:"file name"`
	Content   string `json:"content" desc:"the file's text"`
	FolderID  string `json:"folder_id,omitempty" desc:"parent folder id; default My Drive"`
	MimeType  string `json:"mime_type,omitempty" desc:"default text/plain (text/csv for a spreadsheet)"`
	ConvertTo string `json:"convert_to,omitempty" desc:"import as a Google Doc or Sheet" enum:"document,spreadsheet"`
}

func (g *group) createFile(ctx context.Context, in createFileIn) (any, error) {
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
}

type createFolderIn struct {
	Name     string `json:"name" desc:"folder name"`
	ParentID string `json:"parent_id,omitempty" desc:"parent folder id; default My Drive"`
}

func (g *group) createFolder(ctx context.Context, in createFolderIn) (any, error) {
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
}

type moveIn struct {
	FileID   string `json:"file_id" desc:"Drive file or folder id"`
	FolderID string `json:"folder_id,omitempty" desc:"move into this folder (root: My Drive)"`
	Name     string `json:"name,omitempty" desc:"new name"`
}

// sharedWith lists who besides its owners can reach folder: people,
// groups and domains by address or name, "anyone with the link".
func (g *group) sharedWith(ctx context.Context, folder string) ([]string, error) {
	perms, err := g.permissions(ctx, folder)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range perms {
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

// permissions are the folder's sharing, read once per call: the effect,
// the summary and the reach of a move all ask. My Drive ("root") is the
// person's own.
func (g *group) permissions(ctx context.Context, folder string) ([]*gdrive.Permission, error) {
	folder = strings.TrimSpace(folder)
	if folder == "root" {
		return nil, nil
	}
	perms, err := tools.Once(ctx, "drive.shared "+folder, func() (*gdrive.PermissionList, error) {
		return google.Do(ctx, g.api, fileWhat(folder), func(svc *gdrive.Service) (*gdrive.PermissionList, error) {
			return svc.Permissions.List(folder).Context(ctx).SupportsAllDrives(true).Fields("permissions(type,role,emailAddress,domain)").Do()
		})
	})
	if err != nil {
		return nil, err
	}
	return perms.Permissions, nil
}

// reachOfMove is whom a move gives access to: everyone the destination
// folder is shared with, besides its owner.
func (g *group) reachOfMove(ctx context.Context, in moveIn) tools.Reach {
	if strings.TrimSpace(in.FolderID) == "" {
		return tools.Reach{}
	}
	perms, err := g.permissions(ctx, in.FolderID)
	if err != nil {
		return tools.UnknownReach("who can see the destination folder could not be read")
	}
	var emails, domains, unknown []string
	for _, p := range perms {
		switch {
		case p.Role == "owner":
		case p.Type == "anyone":
			unknown = append(unknown, "anyone with the link to the destination folder")
		case p.Type == "domain":
			domains = append(domains, tools.NormalHost(p.Domain))
		default:
			emails = append(emails, p.EmailAddress)
		}
	}
	r := tools.AddressReach(emails...)
	r.Domains = append(r.Domains, domains...)
	r.Unknown = append(r.Unknown, unknown...)
	return r
}

func (g *group) move(ctx context.Context, in moveIn) (any, error) {
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
}

type trashOut struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Trashed bool   `json:"trashed"`
}

func (g *group) trash(ctx context.Context, in idIn) (any, error) {
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
}
