// Package drive provides the google_drive tool group: search, read and
// organise files in the calling person's Google Drive.
package drive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gdrive "google.golang.org/api/drive/v3"
	"google.golang.org/api/googleapi"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_drive"

// Service returns the Drive API as the group asks google.Client for it:
// path drive/v3/ and the full Drive scope.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "drive/v3/", Scopes: []string{gdrive.DriveScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff governs retries of temporary Google errors (429, 5xx).
	Backoff backoff.Policy
	// MaxReadChars caps what drive_read returns in one call; zero means
	// 100,000 characters.
	MaxReadChars int
	// Save, when set, keeps a PDF or Office export in the calling chat's
	// files and returns the name it got there; without it those exports
	// are refused.
	Save func(ctx context.Context, name string, data []byte) (string, error)
}

// New returns the google_drive group, its tools and scopes. Every tool
// acts as the calling person through c; a person without a connected
// account gets a not_connected error.
func New(c google.Client, o Options) google.Group {
	if o.MaxReadChars <= 0 {
		o.MaxReadChars = 100000
	}
	g := &group{opts: o, api: newAPI(c, o.Backoff)}
	return google.Group{Examples: examples,
		Group: tools.Group{
			Name:        GroupName,
			DisplayName: "Google Drive",
			Description: "Search, read, create, move, share and trash files and folders in the person's Google Drive.",
		},
		Tools: []tools.Tool{
			tools.New(tools.Definition{
				Name:        "drive_search",
				Description: "Search Drive files by name, full text, type or folder; with no filter, lists recently modified files.",
				ReadOnly:    true, Untrusted: true,
			}, g.search),
			tools.New(tools.Definition{
				Name:        "drive_get",
				Description: "Get a Drive file's metadata: name, type, size, dates, owners, link, parent folders and who has access.",
				ReadOnly:    true, Untrusted: true,
			}, g.get),
			tools.New(tools.Definition{
				Name:        "drive_read",
				Description: "Read a Drive file as text: Docs and Slides as plain text, Sheets as CSV (first sheet), text files as they are; long content is cut with a note.",
				ReadOnly:    true, Untrusted: true,
				Timeout: 60 * time.Second,
			}, g.read),
			tools.New(tools.Definition{
				Name:        "drive_export",
				Description: "Export a Google Doc, Sheet or Slides as text, Markdown or CSV, or as PDF or Office into the chat's files.",
				Timeout:     90 * time.Second,
			}, g.export),
			tools.New(tools.Definition{
				Name:        "drive_create_file",
				Description: "Create a Drive file from text, optionally converted to a Google Doc (from text or Markdown) or Sheet (from CSV).",
				Timeout:     60 * time.Second,
			}, g.createFile),
			tools.New(tools.Definition{
				Name:        "drive_create_folder",
				Description: "Create a Drive folder.",
			}, g.createFolder),
			tools.New(tools.Definition{
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
				Reaches: tools.By(g.reachOfMove),
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
			}, g.move),
			tools.New(tools.Definition{
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
				Reaches: tools.By(func(_ context.Context, in shareIn) tools.Reach {
					if in.AnyoneWithLink {
						return tools.UnknownReach("anyone with the link")
					}
					return tools.Reach{}
				}),
			}, g.share),
			tools.New(tools.Definition{
				Name:        "drive_unshare",
				Description: "Stop sharing a Drive file or folder with an email address, or with anyone who has the link.",
				Effect:      tools.EffectDestructive,
				Summarize: tools.By(func(_ context.Context, in unshareIn) string {
					return fmt.Sprintf("Take away %s's access to the Drive file %s", tools.Shorten(audience(in.Email, in.AnyoneWithLink), 80), in.FileID)
				}),
			}, g.unshare),
			tools.New(tools.Definition{
				Name:        "drive_trash",
				Description: "Move a Drive file or folder to the trash, where it can be restored for 30 days.",
				Effect:      tools.EffectDestructive,
				Summarize: tools.By(func(_ context.Context, in idIn) string {
					return "Move the Drive file " + in.FileID + " to the trash"
				}),
			}, g.trash),
		},
		Scopes: Service().Scopes,
	}
}

type group struct {
	opts Options
	api  google.API[gdrive.Service]
}

// newAPI is the Drive API as the caller, with Drive's own error mapping:
// the group's and Download's.
func newAPI(c google.Client, b backoff.Policy) google.API[gdrive.Service] {
	return google.API[gdrive.Service]{Client: c, Service: Service(), New: gdrive.NewService, Backoff: b, Map: mapError}
}

// mapError is google.MapError with Drive's export size limit (a 403 that
// is not about permission) reported as an invalid argument.
func mapError(err error, what string) error {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == 403 {
		for _, e := range ge.Errors {
			if e.Reason == "exportSizeLimitExceeded" {
				return &tools.Error{Code: tools.CodeInvalidArgument,
					Message:    fmt.Sprintf("%s is too large for Google to export as text.", what),
					Suggestion: "Tell the person the document is too large to read here; share its link instead."}
			}
		}
	}
	return google.MapError(err, what)
}

func fileWhat(id string) string { return fmt.Sprintf("the file '%s'", id) }

// Google-native MIME types.
const (
	mimeFolder       = "application/vnd.google-apps.folder"
	mimeDocument     = "application/vnd.google-apps.document"
	mimeSpreadsheet  = "application/vnd.google-apps.spreadsheet"
	mimePresentation = "application/vnd.google-apps.presentation"
	mimeShortcut     = "application/vnd.google-apps.shortcut"
	googleApps       = "application/vnd.google-apps."
)

// friendlyTypes lists drive_search's type values.
const friendlyTypes = "document,spreadsheet,presentation,folder,form,pdf,image,video,text"

// typeQuery maps a friendly type to a Drive query clause; "" if unknown.
func typeQuery(t string) string {
	switch t {
	case "document", "spreadsheet", "presentation", "folder", "form":
		return "mimeType = '" + googleApps + t + "'"
	case "pdf":
		return "mimeType = 'application/pdf'"
	case "image", "video", "text":
		return "mimeType contains '" + t + "/'"
	}
	return ""
}

// friendlyType names a MIME type the way drive_search's type parameter
// does: "document", "folder", "pdf"…; other types stay MIME types.
func friendlyType(mime string) string {
	if rest, ok := strings.CutPrefix(mime, googleApps); ok {
		return rest
	}
	if mime == "application/pdf" {
		return "pdf"
	}
	return mime
}

// quote makes s a Drive query string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// shortTime drops fractional seconds from Drive's RFC 3339 times.
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}

// file is a file as tools return it.
type file struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Size     int64    `json:"size,omitempty"`
	Modified string   `json:"modified,omitempty"`
	Link     string   `json:"link,omitempty"`
	Parents  []string `json:"parents,omitempty"`
}

const fileFields = "id,name,mimeType,size,modifiedTime,webViewLink,parents"

func toFile(f *gdrive.File) file {
	return file{ID: f.Id, Name: f.Name, Type: friendlyType(f.MimeType), Size: f.Size,
		Modified: shortTime(f.ModifiedTime), Link: f.WebViewLink, Parents: f.Parents}
}
